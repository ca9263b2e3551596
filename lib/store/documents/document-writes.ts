import { BSON } from 'mongodb';
import type { Collection, Document } from 'mongodb';
import { DocumentLockedError } from '../../errors/document-locked.error';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error';
import { MongoLockError } from '../../errors/mongo-lock.error';
import { VersionConflictError } from '../../errors/version-conflict.error';
import { formatMs } from '../../util/durations';
import { toRemainingMs } from '../bson-values';
import { isTooLargeError } from '../mongo-error-codes';
import type { BsonInteger } from '../bson-values';
import { byKey, callerIdOfKey, documentNotFound } from './document-key';
import {
  versionBumpOperators,
  versionBumpStage,
  versionTyped,
  versionTypedExpr,
} from './document-version';
import type { DocumentVersion } from './document-version';
import type { Successor } from '../line/line-commands';
import type { DocumentLineFields } from './document-line';

/** The application collection whose documents carry a lock field. */
export type DocumentCollection = Pick<
  Collection<Document>,
  'findOneAndUpdate' | 'findOne' | 'watch' | 'collectionName'
>;

/** An update document (`{ $set: … }`) or an update pipeline (`[{ $set: … }]`). */
export type DocumentUpdate = Document | Document[];

export interface DocumentWriteTarget {
  collection: DocumentCollection;
  lock: DocumentLineFields;
  version: DocumentVersion | undefined;
}

/** MongoDB's limit on a BSON document (`maxBsonObjectSize`): an update's, and a document's. */
const MAX_BSON_BYTES = 16 * 1024 * 1024;

/** How often a write is tried when it met a date version from the same ms (or lost a race). */
const SAME_MILLISECOND_TRIES = 5;

function isPipeline(update: DocumentUpdate | undefined): update is Document[] {
  return Array.isArray(update);
}

function isEmpty(update: DocumentUpdate | undefined): boolean {
  return (
    update === undefined ||
    (isPipeline(update) ? update.length === 0 : Object.keys(update).length === 0)
  );
}

function and(...filters: Document[]): Document {
  const parts = filters.filter((filter) => Object.keys(filter).length > 0);
  return parts.length === 1 ? parts[0] : { $and: parts };
}

/** Adds `extra`'s operators to `update`'s (the caller checked they name different fields). */
function mergeOperators(update: Document, extra: Document): Document {
  const merged: Document = { ...update };
  for (const [operator, fields] of Object.entries(extra)) {
    merged[operator] = { ...(merged[operator] as Document | undefined), ...(fields as Document) };
  }
  return merged;
}

/** One write's update and filter: the caller's update, the version bump (if asked), the unlock. */
function composeWrite(
  target: DocumentWriteTarget,
  update: DocumentUpdate | undefined,
  unlock: string | undefined,
  bumpVersion: boolean,
  dateAhead?: Date,
): { update: DocumentUpdate; filter: Document } {
  const { lock, version } = target;
  const bump = version && bumpVersion;
  if (isPipeline(update) || isEmpty(update)) {
    const stages = isPipeline(update) ? [...update] : [];
    if (bump) stages.push(versionBumpStage(version));
    if (unlock !== undefined) stages.push(lock.leaveStage(unlock));
    return { update: stages, filter: bump ? versionTyped(version) : {} };
  }
  let operators = update as Document;
  let filter: Document = {};
  if (bump) {
    const versionBump = versionBumpOperators(version, dateAhead);
    operators = mergeOperators(operators, versionBump.operators);
    filter = and(versionTyped(version), versionBump.filter);
  }
  if (unlock !== undefined) operators = mergeOperators(operators, lock.leaveOperators(unlock));
  return { update: operators, filter };
}

/**
 * One write's update: the document after it (no lock field), or `null` when `filter` matched
 * none. An update too large for MongoDB, refused by us before it is sent (the driver would fail
 * while serializing it) or by MongoDB, wrote nothing: `InvalidLockOptionsError` on `update`.
 */
async function findAndWrite(
  target: DocumentWriteTarget,
  key: string,
  filter: Document,
  update: DocumentUpdate,
): Promise<Document | null> {
  if (BSON.calculateObjectSize({ update }) > MAX_BSON_BYTES) throw updateTooLarge(key);
  try {
    return await target.collection.findOneAndUpdate(filter, update, {
      returnDocument: 'after',
      projection: { [target.lock.field]: 0 },
    });
  } catch (error) {
    throw isTooLargeError(error) ? updateTooLarge(key, error) : error;
  }
}

function updateTooLarge(key: string, cause?: unknown): InvalidLockOptionsError {
  return new InvalidLockOptionsError(
    `Document ${key}: the update is too large: it, or the document after it, would exceed ` +
      `MongoDB's limit on a BSON document, 16 MB (${MAX_BSON_BYTES} bytes); nothing was written`,
    { option: 'update', cause },
  );
}

/**
 * Writes only while `owner`'s entry holds the document; with `unlock` (a commit) it also leaves
 * the line, in one write. The new document (no lock field), or `null`: not ours, nothing written.
 */
export async function writeWhileHeld(
  target: DocumentWriteTarget,
  key: string,
  owner: string,
  update: DocumentUpdate | undefined,
  unlock: boolean,
  /** The entry a commit expects behind ours (`null`: none), tried first (`unlockBefore`). */
  next: Successor | null | undefined,
): Promise<Document | null> {
  const held = { $expr: target.lock.ownedBy(owner) };
  if (unlock && next !== undefined && !isPipeline(update) && !isEmpty(update)) {
    const expected = target.lock.unlockBefore(owner, next);
    const write = composeWrite(target, update, undefined, true);
    const written = await findAndWrite(
      target,
      key,
      and(byKey(key), held, expected.filter, write.filter),
      mergeOperators(write.update, expected.operators),
    );
    if (written !== null) return written;
    // The entry behind us changed (or not ours, or a same-ms date): the general form decides.
  }
  // A commit without an update only unlocks: no version bump.
  const compose = (dateAhead?: Date) =>
    composeWrite(target, update, unlock ? owner : undefined, !isEmpty(update), dateAhead);
  let write = compose();
  for (let tries = 1; ; tries += 1) {
    const written = await findAndWrite(
      target,
      key,
      and(byKey(key), held, write.filter),
      write.update,
    );
    if (written !== null) return written;
    const { version } = target;
    const state = await target.collection.findOne(byKey(key), {
      projection: {
        _id: 0,
        ours: target.lock.ownedBy(owner),
        ...(version && { typed: versionTypedExpr(version), version: `$${version.field}` }),
      },
    });
    if (state?.ours !== true) return null;
    if (version && state.typed !== true) throw badVersionField(target, key);
    // Ours, typed, yet not written: a date version not before the server's clock, or a race
    // (the entry ahead of ours ran out between the write and the read).
    if (tries >= SAME_MILLISECOND_TRIES) throw notWritten(target.version, key);
    if (state.version instanceof Date) write = compose(state.version);
    // One wait a try: a date version from this very ms, or the race, has moved on by then.
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Writes, bumping the version, only while it equals `expected` and no lease holds the document. */
export async function updateIfCurrent(
  target: DocumentWriteTarget & { version: DocumentVersion },
  key: string,
  expected: unknown,
  update: DocumentUpdate,
): Promise<Document> {
  const { lock, version } = target;
  // An empty update still bumps the version: the caller asked for a versioned write.
  const compose = (dateAhead?: Date) => composeWrite(target, update, undefined, true, dateAhead);
  let bumped = compose();
  for (let tries = 1; ; tries += 1) {
    const written = await findAndWrite(
      target,
      key,
      and(
        { ...byKey(key), [version.field]: expected },
        { $expr: { $not: [lock.held] } },
        bumped.filter,
      ),
      bumped.update,
    );
    if (written !== null) return written;
    const state = await target.collection.findOne(byKey(key), {
      projection: {
        _id: 0,
        version: `$${version.field}`,
        typed: versionTypedExpr(version),
        // Compared by the server, as the write's filter is (decimals past a double's precision).
        current: { $eq: [`$${version.field}`, { $literal: expected }] },
        held: lock.held,
        holder: lock.holder,
        remainingMs: lock.remainingMs,
      },
    });
    const id = callerIdOfKey(key);
    if (state === null) throw documentNotFound(key);
    if (state.typed !== true) throw badVersionField(target, key);
    if (state.current !== true) {
      throw new VersionConflictError(
        `Document ${key} is at version ${String(state.version)}, not ${String(expected)}: ` +
          'someone else wrote it meanwhile',
        { id, expected, current: state.version },
      );
    }
    if (state.held === true) {
      const retryAfterMs = toRemainingMs(state.remainingMs as BsonInteger);
      throw new DocumentLockedError(
        `Document ${key} is locked by ${String(state.holder)} for another ${formatMs(retryAfterMs)}`,
        { id, retryAfterMs, holderId: (state.holder as string | undefined) ?? undefined },
      );
    }
    // At the version, unlocked, yet not written: a date version not before the server's clock,
    // or a race (the lock ended between the write and the read).
    if (tries >= SAME_MILLISECOND_TRIES) throw notWritten(target.version, key);
    if (state.version instanceof Date) bumped = compose(state.version);
  }
}

/**
 * The error once every try matched nothing though the read after each found nothing in the way.
 * @internal
 */
export function notWritten(version: DocumentVersion | undefined, key: string): MongoLockError {
  if (version?.type === 'date') {
    return new MongoLockError(
      `Document ${key}'s date version ${JSON.stringify(version.field)} is not before MongoDB's ` +
        'clock, so an update document cannot move it forward; use an update pipeline (the ' +
        'version then moves to a millisecond after it), or let only the library write the version',
    );
  }
  // No date to blame (no version, or a number): say what was seen, not a cause we cannot know.
  return new MongoLockError(
    `Document ${key} was not written in ${SAME_MILLISECOND_TRIES} tries, though the read after ` +
      'each found nothing in the way; nothing was written',
  );
}

function badVersionField(target: DocumentWriteTarget, key: string): InvalidLockOptionsError {
  const version = target.version as DocumentVersion;
  return new InvalidLockOptionsError(
    `Document ${key} has no ${version.type} in its version field ${JSON.stringify(version.field)}`,
    { option: 'version' },
  );
}
