import type { ClientSession, ResumeToken, Timestamp } from 'mongodb';
import type { LockChangeStream, LockCollection, SessionSource } from './lock-document';

export interface OpenLockChangeStreamOptions {
  /** Start at this server time, so nothing after the attempt that made us wait is missed. */
  startAtOperationTime?: Timestamp;
  /** Continue after this event (resuming after an error). */
  resumeAfter?: ResumeToken;
  /** How long one `getMore` waits on the server for events. */
  maxAwaitTimeMS?: number;
  /**
   * `releases`: only what can free a lock, without looking up documents (all that waiters
   * need). `ownership`: acquisitions too, with the current document (for `events$`).
   */
  scope?: LockChangeScope;
  /** This process's holder id: direct grants to it pass the `releases` filter too. */
  grantee?: string;
}

export type LockChangeScope = 'releases' | 'ownership';

/**
 * Server-side filters. Renewals (which touch only `expiresAt`) and no-op attempts never
 * leave the server; for waiters, acquisitions do not either, except a direct grant to this
 * process (`grantee`): other processes never hear of a hand-off that is not theirs.
 */
export function lockReleasePipeline(grantee?: string) {
  return [
    {
      $match: {
        $or: [
          ...LOCK_RELEASE_MATCHES,
          ...(grantee === undefined
            ? []
            : [{ operationType: 'update', 'updateDescription.updatedFields.grantee': grantee }]),
        ],
      },
    },
  ];
}

const LOCK_RELEASE_MATCHES = [
  { operationType: { $in: ['replace', 'delete'] } },
  // `$type: 'null'`, not `null`: a bare null would also match updates without `owner`.
  { operationType: 'update', 'updateDescription.updatedFields.owner': { $type: 'null' } },
  // A shared or permit holder left, or a waiting process withdrew its reservation.
  { operationType: 'update', 'updateDescription.updatedFields.frees': { $exists: true } },
];

export const LOCK_OWNERSHIP_PIPELINE = [
  {
    $match: {
      $or: [
        { operationType: { $in: ['insert', 'replace', 'delete'] } },
        { operationType: 'update', 'updateDescription.updatedFields.owner': { $exists: true } },
        { operationType: 'update', 'updateDescription.updatedFields.frees': { $exists: true } },
        // A shared or permit holder's grant moves the key's fence.
        { operationType: 'update', 'updateDescription.updatedFields.fence': { $exists: true } },
      ],
    },
  },
];

/**
 * Opens a change stream over the lock collection. The driver resumes it by itself after
 * resumable errors; the caller decides what to do with the others.
 *
 * @example
 * const stream = openLockChangeStream(collection, sessions, { startAtOperationTime: outcome.operationTime });
 * const change = await stream.tryNext();
 */
export function openLockChangeStream(
  collection: LockCollection,
  sessions: SessionSource,
  {
    startAtOperationTime,
    resumeAfter,
    maxAwaitTimeMS = 1_000,
    scope = 'ownership',
    grantee,
  }: OpenLockChangeStreamOptions,
): LockChangeStream {
  const releasesOnly = scope === 'releases';
  return watchInOwnSession(sessions, (session) =>
    collection.watch(releasesOnly ? lockReleasePipeline(grantee) : LOCK_OWNERSHIP_PIPELINE, {
      fullDocument: releasesOnly ? 'default' : 'updateLookup',
      maxAwaitTimeMS,
      ...(resumeAfter ? { resumeAfter } : startAtOperationTime ? { startAtOperationTime } : {}),
      session,
    }),
  );
}

/**
 * Opens a stream with `watch` in a session of its own, ended once the stream has closed. In
 * the driver's implicit session, a close while a `getMore` is on its way can leave the cursor
 * open on the server: the `getMore`'s reply ends the session, and the `killCursors` still
 * waiting for a connection (a busy pool) then fails, silently.
 */
export function watchInOwnSession(
  sessions: SessionSource,
  watch: (session: ClientSession) => LockChangeStream,
): LockChangeStream {
  const session = sessions.startSession({ causalConsistency: false });
  let stream: LockChangeStream;
  try {
    stream = watch(session);
  } catch (error) {
    void session.endSession().catch(() => undefined);
    throw error;
  }
  return {
    tryNext: () => stream.tryNext(),
    get resumeToken() {
      return stream.resumeToken;
    },
    get closed() {
      return stream.closed;
    },
    close: () => stream.close().finally(() => session.endSession()),
  };
}
