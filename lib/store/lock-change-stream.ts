import type { ClientSession, ResumeToken, Timestamp } from 'mongodb';
import type { LockChangeStream, LockCollection, SessionSource } from './lock-document';
import { nextTurn } from '../util/timers';

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

/** How long a close waits for the stream's read on its way before ending its session. */
const READ_SETTLE_WAIT_MS = 5_000;

/**
 * Opens a stream with `watch` in a session of its own, ended once the stream has closed and
 * its read on the way has settled. In the driver's implicit session, a close while a command
 * of the stream is on its way can leave the cursor open on the server: a `getMore`'s reply
 * ends the session, and the `killCursors` still waiting for a connection (a busy pool) then
 * fails, silently; an opening `aggregate` answered after the close kills its new cursor only
 * while the session lives.
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
  let reading: Promise<unknown> | undefined;
  let afterChange = false;
  return {
    tryNext: async () => {
      // Whoever the last change woke (a caller handed a lock) goes on before the next read
      // is sent: the driver's work and the socket write would otherwise come first.
      if (afterChange) await nextTurn();
      const read = stream.tryNext();
      reading = read;
      const change = await read;
      afterChange = change !== null;
      return change;
    },
    get resumeToken() {
      return stream.resumeToken;
    },
    get closed() {
      return stream.closed;
    },
    close: async () => {
      try {
        await stream.close();
      } finally {
        const settled = reading?.then(
          () => undefined,
          () => undefined,
        );
        let timer: NodeJS.Timeout | undefined;
        const bound = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, READ_SETTLE_WAIT_MS);
          timer.unref();
        });
        await Promise.race([settled, bound]);
        clearTimeout(timer);
        await session.endSession();
      }
    },
  };
}
