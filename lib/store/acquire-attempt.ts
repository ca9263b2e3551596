import type { Timestamp } from 'mongodb';
import { LONG_ONE, LONG_ZERO, REMAINING_LEASE_MS, toBigInt, toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import type { LockCollection, SessionSource } from './lock-document';
import { isDuplicateKeyError } from './mongo-error-codes';

export interface AcquireAttemptRequest {
  key: string;
  /** Fresh random token of this attempt. */
  owner: string;
  holder: string;
  ttlMs: number;
  /** Document locks only: what the document must meet, or be created with. */
  target?: AttemptTarget;
}

/** What an attempt records or checks besides the lease: its scope, a document's conditions. */
export interface AttemptTarget {
  /** The owner scope recorded with the lease (`releaseScope`). */
  scope?: string;
  /** Extra conditions on the document (a tenant, say); not met = not found. */
  where?: Record<string, unknown>;
  /** Insert the document with these fields when no document has the id. */
  createIfMissing?: Record<string, unknown>;
}

interface AttemptOutcomeBase {
  key: string;
  /** Monotonic time (`performance.now()`) just before the request was sent. */
  sentAt: number;
  /** Remaining lease of whoever holds the key now (us, if won), by the server clock. */
  remainingMs: number;
  /** Server time of the attempt; change streams for waiters start here. */
  operationTime: Timestamp | undefined;
  /** Who holds the key now (us, if won). */
  holderId: string | null;
}

export interface AcquireAttemptWon extends AttemptOutcomeBase {
  won: true;
  owner: string;
  fence: bigint;
  /** Document locks only: the document as locked (without its lock field). */
  document?: { doc: Record<string, unknown>; created: boolean };
}

export interface AcquireAttemptLost extends AttemptOutcomeBase {
  won: false;
}

export type AcquireAttemptOutcome = AcquireAttemptWon | AcquireAttemptLost;

interface AttemptReply {
  owner: string | null;
  holder: string | null;
  fence: BsonInteger;
  remainingMs: BsonInteger;
}

/** Each field takes its new value when the key is free and keeps its old one otherwise. */
function whenFree(newValue: unknown, oldValue: string) {
  const free = {
    $or: [{ $eq: [{ $ifNull: ['$owner', null] }, null] }, { $lte: ['$expiresAt', '$$NOW'] }],
  };
  return { $cond: [free, newValue, oldValue] };
}

function acquirePipeline({ owner, holder, ttlMs, target }: AcquireAttemptRequest) {
  // Every `$cond` reads the document as it was before this stage, so they agree on `free`.
  // When the key is held, each field is set to itself: the server sees a no-op, writes
  // nothing to the oplog, and no change event wakes anyone.
  return [
    {
      $set: {
        owner: whenFree(owner, '$owner'),
        holder: whenFree(holder, '$holder'),
        // Never below the server's clock in ms, so a key whose idle document was
        // garbage-collected still gets a larger fence than any it had before.
        fence: whenFree(
          {
            $max: [{ $add: [{ $ifNull: ['$fence', LONG_ZERO] }, LONG_ONE] }, { $toLong: '$$NOW' }],
          },
          '$fence',
        ),
        acquiredAt: whenFree('$$NOW', '$acquiredAt'),
        expiresAt: whenFree({ $add: ['$$NOW', ttlMs] }, '$expiresAt'),
        gcAt: whenFree(null, '$gcAt'),
        scope: whenFree({ $literal: target?.scope ?? null }, '$scope'),
      },
    },
  ];
}

/**
 * One acquisition attempt in one round trip: a single upserting `findOneAndUpdate` that
 * takes the key if it is free (no owner, or the lease ended by the server clock) and
 * otherwise returns the holder's state. Won iff the returned owner is our token.
 *
 * @example
 * const outcome = await attemptAcquire(collection, client, { key, owner: randomUUID(), holder, ttlMs });
 * if (outcome.won) console.log(outcome.fence);
 */
export async function attemptAcquire(
  collection: LockCollection,
  sessions: SessionSource,
  request: AcquireAttemptRequest,
): Promise<AcquireAttemptOutcome> {
  try {
    return await attemptOnce(collection, sessions, request);
  } catch (error) {
    // Two first-time upserts of one key can race to insert; the loser sees the winner's
    // document on a second try.
    if (!isDuplicateKeyError(error)) throw error;
    return attemptOnce(collection, sessions, request);
  }
}

async function attemptOnce(
  collection: LockCollection,
  sessions: SessionSource,
  request: AcquireAttemptRequest,
): Promise<AcquireAttemptOutcome> {
  // A causally consistent session records the reply's operationTime; starting one sends nothing.
  const session = sessions.startSession({ causalConsistency: true });
  try {
    const sentAt = performance.now();
    const reply = (await collection.findOneAndUpdate(
      { _id: request.key },
      acquirePipeline(request),
      {
        upsert: true,
        returnDocument: 'after',
        projection: { owner: 1, holder: 1, fence: 1, remainingMs: REMAINING_LEASE_MS },
        session,
      },
    )) as AttemptReply | null;
    if (reply === null) throw new Error(`Upsert of lock ${request.key} returned no document`);
    const base = {
      key: request.key,
      sentAt,
      remainingMs: toRemainingMs(reply.remainingMs),
      operationTime: session.operationTime,
    };
    if (reply.owner === request.owner) {
      return {
        ...base,
        won: true,
        holderId: request.holder,
        owner: request.owner,
        fence: toBigInt(reply.fence),
      };
    }
    return { ...base, won: false, holderId: reply.holder ?? null };
  } finally {
    await session.endSession();
  }
}
