import type { ChangeStreamDocument, Document } from 'mongodb';
import type { LockEvent } from '../../interfaces/lock-state.interface';
import type { HeldDocument } from '../line/line-commands';
import type { LineEntry } from '../line/line-document';
import { holdingEntry } from '../line/line-document';
import type { LineChange, LineWatch } from '../line/line-events';
import { leadPattern, reopeningStream } from '../line/line-events';
import { keyOfDocumentId } from './document-key';
import type { DocumentLineFields } from './document-line';
import type { DocumentLineStore } from './document-line-store';

type DocumentChange = Extract<
  ChangeStreamDocument<Document>,
  { operationType: 'update' | 'replace' | 'delete' }
> & { wallTime?: Date };

/**
 * Changes that may make an entry of `holderId`'s process hold: a leave or commit naming it (or
 * `*`: every process) as leader. Replacements, deletions and lock fields or lines removed by
 * other code make the key's waiters look.
 */
export function watchDocumentLines(
  { collection, fields, operationTimeoutMs }: DocumentLineStore,
  holderId: string,
  onChange: (change: LineChange) => void,
  onFailure?: (error: unknown) => void,
  onOpen?: () => void,
): LineWatch {
  return watchChanges(
    { collection, operationTimeoutMs },
    changeFilter(fields, leadPattern(holderId)),
    { fullDocument: 'updateLookup' },
    (event) => {
      const key = keyOfDocumentId(event.documentKey._id);
      if (event.operationType !== 'update' || !event.fullDocument) {
        return onChange({ key, holders: [], lookAgain: true });
      }
      const lock = event.fullDocument[fields.field] as { line?: LineEntry[] } | undefined;
      // A commit by update document leaves dead entries behind: none of them leads.
      const at = event.wallTime instanceof Date ? event.wallTime.getTime() : -Infinity;
      const live = (lock?.line ?? []).filter((entry) => entry.e.getTime() > at);
      // No entry left: other code may have removed the line.
      if (live.length === 0) return onChange({ key, holders: [], lookAgain: true });
      // `updateLookup` read the document after the change: the holder gets it, saving a read.
      const doc = fields.strip(event.fullDocument);
      const next = live[1] ? { t: live[1].t, h: live[1].h } : null;
      const news: HeldDocument = { doc, created: false, fromEvent: true, next };
      onChange({ key, holders: [holdingEntry(live[0])], news });
    },
    onFailure,
    onOpen,
  );
}

/** Every change that may free a document's lock, as a release (or deletion) event. */
export function watchDocumentEvents(
  { collection, fields, operationTimeoutMs }: DocumentLineStore,
  onEvent: (event: LockEvent) => void,
  onFailure?: (error: unknown) => void,
  onOpen?: () => void,
): LineWatch {
  return watchChanges(
    { collection, operationTimeoutMs },
    changeFilter(fields),
    {},
    (event) => {
      onEvent({
        type: event.operationType === 'delete' ? 'deleted' : 'released',
        key: keyOfDocumentId(event.documentKey._id),
        holderId: null,
        fence: null,
        at: event.wallTime instanceof Date ? event.wallTime : new Date(),
      });
    },
    onFailure,
    onOpen,
  );
}

/**
 * Updates that set or remove the lead (matching `leads` if given) or drop the lock field or its
 * line; replacements; deletions. A changed lead shows as a dotted name (read with `$getField`)
 * or inside the whole lock field, as the server diffed it.
 */
function changeFilter(fields: DocumentLineFields, leads?: string): Document {
  const lead = fields.path('lead');
  const line = fields.path('line');
  const updated = (field: string) => ({
    $getField: { field, input: '$updateDescription.updatedFields' },
  });
  const dotted = updated(lead);
  const named = leads
    ? [
        { [`updateDescription.updatedFields.${lead}`]: { $regex: leads } },
        { $expr: { $regexMatch: { input: { $ifNull: [dotted, ''] }, regex: leads } } },
      ]
    : [
        { [`updateDescription.updatedFields.${fields.field}`]: { $exists: true } },
        { $expr: { $ne: [{ $type: dotted }, 'missing'] } },
        { 'updateDescription.removedFields': lead },
      ];
  return {
    $or: [
      { operationType: { $in: ['replace', 'delete'] } },
      // Lock field or line removed, nulled or set without a line: other code, never the library.
      {
        operationType: 'update',
        'updateDescription.removedFields': { $in: [fields.field, line] },
      },
      {
        operationType: 'update',
        [`updateDescription.updatedFields.${fields.field}`]: { $type: 'null' },
      },
      {
        operationType: 'update',
        [`updateDescription.updatedFields.${fields.field}`]: { $type: 'object' },
        [`updateDescription.updatedFields.${line}`]: { $exists: false },
      },
      ...named.map((condition) => ({ operationType: 'update', ...condition })),
    ],
  };
}

function watchChanges(
  { collection, operationTimeoutMs }: Pick<DocumentLineStore, 'collection' | 'operationTimeoutMs'>,
  filter: Document,
  options: { fullDocument?: 'updateLookup' },
  onChange: (event: DocumentChange) => void,
  onFailure: (error: unknown) => void = () => undefined,
  onOpen?: () => void,
): LineWatch {
  return reopeningStream<DocumentChange>(
    (resuming) =>
      collection.watch<Document, DocumentChange>([{ $match: filter }], { ...options, ...resuming }),
    (event) => {
      if (event.documentKey?._id !== undefined) onChange(event);
    },
    onFailure,
    onOpen,
    { answerWithinMs: operationTimeoutMs },
  );
}
