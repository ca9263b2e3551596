import type { Document } from 'mongodb';
import { watchInOwnSession } from '../lock-change-stream';
import type { OpenLockChangeStreamOptions } from '../lock-change-stream';
import type { LockChangeStream, SessionSource } from '../lock-document';
import type { DocumentCollection } from './document-lease-commands';
import type { DocumentLockFields } from './document-lock-fields';

/**
 * Server-side filter: only changes that can free a document lock leave the server. An update
 * shows the lock's owner as `"_lock.owner"` (a field name with a dot, read with `$getField`)
 * or inside a whole `_lock`, depending on how the server diffed it; a `$unset` of the lock
 * field, a replacement and a deletion free it too.
 */
export function documentReleasePipeline(fields: DocumentLockFields): Document[] {
  const updated = '$updateDescription.updatedFields';
  const ownerSetTo = { $getField: { field: fields.path('owner'), input: updated } };
  return [
    {
      $match: {
        $or: [
          { operationType: { $in: ['replace', 'delete'] } },
          {
            operationType: 'update',
            [`updateDescription.updatedFields.${fields.path('owner')}`]: { $type: 'null' },
          },
          {
            operationType: 'update',
            'updateDescription.removedFields': { $in: [fields.field, fields.path('owner')] },
          },
          // The whole lock field set to null, or to a document without an owner, by other code.
          {
            operationType: 'update',
            [`updateDescription.updatedFields.${fields.field}`]: { $type: 'null' },
          },
          {
            operationType: 'update',
            [`updateDescription.updatedFields.${fields.field}`]: { $type: 'object' },
            [`updateDescription.updatedFields.${fields.path('owner')}`]: { $exists: false },
          },
          {
            operationType: 'update',
            // `$type` of a missing field is 'missing', not 'null'.
            $expr: { $eq: [{ $type: ownerSetTo }, 'null'] },
          },
        ],
      },
    },
  ];
}

/** One change stream over the collection for a service's waiters on its document locks. */
export function openDocumentLockChangeStream(
  collection: DocumentCollection,
  sessions: SessionSource,
  fields: DocumentLockFields,
  { startAtOperationTime, resumeAfter, maxAwaitTimeMS = 1_000 }: OpenLockChangeStreamOptions,
): LockChangeStream {
  return watchInOwnSession(
    sessions,
    (session) =>
      collection.watch(documentReleasePipeline(fields), {
        maxAwaitTimeMS,
        ...(resumeAfter ? { resumeAfter } : startAtOperationTime ? { startAtOperationTime } : {}),
        session,
      }) as unknown as LockChangeStream,
  );
}
