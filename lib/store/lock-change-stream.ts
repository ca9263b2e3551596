import type { ResumeToken, Timestamp } from 'mongodb';
import type { LockChangeStream, LockCollection } from './lock-document';

export interface OpenLockChangeStreamOptions {
  /** Start at this server time, so nothing after the attempt that made us wait is missed. */
  startAtOperationTime?: Timestamp;
  /** Continue after this event (resuming after an error). */
  resumeAfter?: ResumeToken;
  /** How long one `getMore` waits on the server for events. */
  maxAwaitTimeMS?: number;
}

/**
 * Server-side filter: only changes of ownership reach the client. Renewals (which touch
 * only `expiresAt`) and no-op attempts never leave the server.
 */
export const LOCK_CHANGE_PIPELINE = [
  {
    $match: {
      $or: [
        { operationType: { $in: ['insert', 'replace', 'delete'] } },
        { operationType: 'update', 'updateDescription.updatedFields.owner': { $exists: true } },
      ],
    },
  },
];

/**
 * Opens a change stream over the lock collection. The driver resumes it by itself after
 * resumable errors; the caller decides what to do with the others.
 *
 * @example
 * const stream = openLockChangeStream(collection, { startAtOperationTime: outcome.operationTime });
 * const change = await stream.tryNext();
 */
export function openLockChangeStream(
  collection: LockCollection,
  { startAtOperationTime, resumeAfter, maxAwaitTimeMS = 1_000 }: OpenLockChangeStreamOptions,
): LockChangeStream {
  return collection.watch(LOCK_CHANGE_PIPELINE, {
    fullDocument: 'updateLookup',
    maxAwaitTimeMS,
    ...(resumeAfter ? { resumeAfter } : startAtOperationTime ? { startAtOperationTime } : {}),
  });
}
