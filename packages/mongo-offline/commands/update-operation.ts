import { BSON, type Document } from 'bson';
import { assertNotView } from '../engine/views';
import {
  type UpdateContext,
  type UpdateSpec,
  applyUpdate,
  buildUpsertDocument,
  isOperatorUpdate,
  isPipelineUpdate,
  validateUpdate,
} from '../engine/apply-update';
import { sameDocument } from '../engine/bson-values';
import { selectDocuments, sortDocuments } from '../engine/select';
import type { CommandContext } from './context';
import { CommandError } from './errors';
import { MAX_BSON_OBJECT_SIZE } from '../wire/opcodes';
import { withStatementCollation } from '../engine/mingo-options';

export interface UpdateRequest {
  filter: Document;
  update: UpdateSpec;
  multi: boolean;
  upsert: boolean;
  arrayFilters?: Document[];
  sort?: Document;
  /** A statement's own collation (update statements carry one each). */
  collation?: Document;
}

export interface UpdateOutcome {
  matched: number;
  modified: number;
  upsertedId?: unknown;
  /** Single-document updates: the images findAndModify returns. */
  before?: Document;
  after?: Document;
}

/**
 * Shared by `update` and `findAndModify`. A no-op (identical BSON after the update) writes
 * nothing: no oplog entry, no change event, not counted as modified.
 */
export function runUpdate(
  context: CommandContext,
  collectionName: string,
  request: UpdateRequest,
): UpdateOutcome {
  validateUpdate(request.update);
  const { storage } = context;
  const existing = storage.getCollection(context.db, collectionName);
  assertNotView(existing);
  const mingo = withStatementCollation(context.mingo, request.collation);
  const updateContext: UpdateContext = {
    now: context.now,
    clusterTime: context.clusterTime,
    arrayFilters: request.arrayFilters,
    filter: request.filter,
    mingo,
  };
  const replacement = !isPipelineUpdate(request.update) && !isOperatorUpdate(request.update);
  let matches = selectDocuments(
    existing,
    request.filter,
    mingo,
    request.multi || request.sort ? 0 : 1,
  );
  if (request.sort) matches = sortDocuments(matches, request.sort, mingo);
  if (!request.multi) matches = matches.slice(0, 1);

  if (matches.length === 0) {
    if (!request.upsert) return { matched: 0, modified: 0 };
    const document = buildUpsertDocument(request.filter, request.update, updateContext);
    assertStorableSize(document, 17420, 'Document to upsert is larger than');
    const collection = storage.ensureCollection(context.db, collectionName);
    storage.insert(collection, document, context.origin);
    return { matched: 0, modified: 0, upsertedId: document._id, after: document };
  }

  const collection = existing!;
  // A multi-update waits for open transactions before its first write, not midway.
  if (matches.length > 1) {
    const ids = matches.map((document) => document._id);
    storage.assertUnlocked?.(collection, ids, context.origin);
  }
  // Compute every new image first so that a failing update in a multi-update changes nothing
  // after the failure point (MongoDB stops there too, keeping earlier documents updated).
  let modified = 0;
  let before: Document | undefined;
  let after: Document | undefined;
  for (const document of matches) {
    const updated = applyUpdate(document, request.update, updateContext);
    before = document;
    after = updated;
    if (sameDocument(document, updated)) {
      after = document;
      continue;
    }
    assertStorableSize(updated, 17419, 'Resulting document after update is larger than');
    const modifier = isOperatorUpdate(request.update) ? (request.update as Document) : undefined;
    storage.update(collection, document, updated, replacement, context.origin, modifier);
    modified += 1;
  }
  return { matched: matches.length, modified, before, after };
}

/**
 * MongoDB 7.0 refuses a document over its BSON limit before writing it: 17419 for an update's
 * result, 17420 for an upsert's (newer servers answer 10334 BSONObjectTooLarge for the former).
 */
function assertStorableSize(document: Document, code: number, message: string): void {
  if (BSON.calculateObjectSize(document) > MAX_BSON_OBJECT_SIZE) {
    throw new CommandError(code, `${message} ${MAX_BSON_OBJECT_SIZE}`);
  }
}
