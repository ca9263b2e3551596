import type { Timestamp } from 'mongodb';
import { REMAINING_LEASE_MS, toBigInt, toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import { attemptPipeline, conflictExpr } from './attempt-pipeline';
import { NEXT_FENCE, cleared, isGrantPending, pendingGrantTo } from './direct-grant';
import type { LockCollection, SessionSource } from './lock-document';
import { modeConflictError } from './lock-mode-errors';
import {
  EXCLUSIVE,
  EXCLUSIVE_LIVE,
  LIVE_HOLDERS,
  LIVE_RESERVATIONS,
  MAX_HOLDERS_PER_KEY,
  RESERVATION_TTL_MS,
  entrySlot,
  isEntryMode,
} from './lock-modes';
import type { LockModeRequest, ReservationUse } from './lock-modes';
import { isDuplicateKeyError } from './mongo-error-codes';

export interface AcquireAttemptRequest {
  key: string;
  /** Fresh random token of this attempt. */
  owner: string;
  holder: string;
  ttlMs: number;
  /** What the attempt records or checks besides the lease (see `AttemptTarget`). */
  target?: AttemptTarget;
  /**
   * Lock collection only: the waiting process's reservation id (see `attemptPipeline`), when
   * the attempt is made while waiting.
   */
  reservation?: string;
  /** How the attempt uses the reservation (see `ReservationUse`). */
  reservationUse?: ReservationUse;
}

/** What an attempt records or checks besides the lease: its scope, a document's conditions. */
export interface AttemptTarget {
  /** The owner scope recorded with the lease (`releaseScope`). */
  scope?: string;
  /** Shared or semaphore (lock collection only); exclusive when absent. */
  mode?: LockModeRequest;
  /** Extra conditions on the document (a tenant, say); not met = not found. */
  where?: Record<string, unknown>;
  /** Insert the document with these fields when no document has the id. */
  createIfMissing?: Record<string, unknown>;
}

interface AttemptOutcomeBase {
  key: string;
  /** Lock collection only: the remaining time of our waiting reservation, if the key keeps one. */
  reservedMs?: number;
  /** Monotonic time (`performance.now()`) just before the request was sent. */
  sentAt: number;
  /** Remaining lease of whoever holds the key now (us, if won), by the server clock. */
  remainingMs: number;
  /** Server time of the attempt; change streams for waiters start here. */
  operationTime: Timestamp | undefined;
  /** Who holds the key now (us, if won); null when shared holders or a reservation block it. */
  holderId: string | null;
}

export interface AcquireAttemptWon extends AttemptOutcomeBase {
  won: true;
  owner: string;
  fence: bigint;
  /**
   * Handed over without a write (see `HeldKey.fenceBlockEnd`): the last fence of the block the
   * lease reserved. Absent for a lease the store wrote: its block starts at `fence`.
   */
  fenceBlockEnd?: bigint;
  /** Document locks only: the document as locked (without its lock field). */
  document?: { doc: Record<string, unknown>; created: boolean };
  /**
   * A grant handed out on its change event, without a write (see `KeyQueue`): `owner` is the
   * grant's placeholder and the lease the short grant lease, until a renewal confirms it.
   */
  grantUnconfirmed?: boolean;
  /**
   * With `grantUnconfirmed`: nobody else waited for the key in this process, so the renewal
   * that confirms the grant also drops its place in line (`RenewLeaseRequest.leaveLine`).
   */
  leavesLine?: boolean;
}

export interface AcquireAttemptLost extends AttemptOutcomeBase {
  won: false;
  /**
   * Decided by the mutex's small command alone: the key is a plain lock, held, and no place in
   * line was taken (see `ReservationUse.plainFirst`).
   */
  plainOnly?: true;
  /**
   * The key is granted to this reservation of a waiting process and not yet confirmed (see
   * `direct-grant.ts`): `holderId` names that process, which may not hold it yet.
   */
  grantPendingTo?: string;
  /** The key has `MAX_HOLDERS_PER_KEY` live holders: the most it can have (entry modes). */
  atHolderCap?: true;
}

export type AcquireAttemptOutcome = AcquireAttemptWon | AcquireAttemptLost;

interface AttemptReply {
  owner: string | null;
  holder: string | null;
  fence: BsonInteger;
  grantedTo?: string | null;
  remainingMs: BsonInteger;
  exclusiveLive: boolean;
  /** Entry modes: our entry, if the key holds it. */
  entry?: { owner: string; fence: BsonInteger; expiresAt: Date; releasedAt?: Date | null };
  entryRemainingMs?: BsonInteger | null;
  liveHolders: BsonInteger;
  /** How the key is used now, when that is not how this attempt asked for it. */
  conflict: boolean;
  permits?: BsonInteger | null;
  /** Until the earliest live lease or foreign reservation ends: when waiting may pay off. */
  waitMs: BsonInteger | null;
  reservedMs?: BsonInteger | null;
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

function replyProjection(
  request: AcquireAttemptRequest,
  mode: LockModeRequest,
  reservation?: string,
) {
  const slot = entrySlot(request.owner);
  const liveCount = { $size: LIVE_HOLDERS };
  const edge = isEntryMode(mode) ? '$min' : '$max';
  const foreignReservations = {
    $filter: { input: LIVE_RESERVATIONS, cond: { $ne: ['$$this.k', reservation ?? null] } },
  };
  return {
    owner: 1,
    holder: 1,
    fence: 1,
    grantedTo: 1,
    permits: 1,
    remainingMs: REMAINING_LEASE_MS,
    exclusiveLive: EXCLUSIVE_LIVE,
    liveHolders: liveCount,
    conflict: conflictExpr(mode, EXCLUSIVE_LIVE, liveCount),
    // A shared or permit request may get in when the first blocking lease ends; an exclusive
    // one needs every holder gone.
    waitMs: {
      $subtract: [
        {
          $min: [
            {
              [edge]: [
                { $cond: [EXCLUSIVE_LIVE, '$expiresAt', null] },
                { [edge]: { $map: { input: LIVE_HOLDERS, in: '$$this.v.expiresAt' } } },
              ],
            },
            // A reservation ahead of us may run out first (its waiter died): look again then.
            { $min: { $map: { input: foreignReservations, in: '$$this.v.expiresAt' } } },
          ],
        },
        '$$NOW',
      ],
    },
    ...(isEntryMode(mode)
      ? {
          entry: `$holders.${slot}`,
          entryRemainingMs: { $subtract: [`$holders.${slot}.expiresAt`, '$$NOW'] },
        }
      : {}),
    ...(reservation === undefined
      ? {}
      : { reservedMs: { $subtract: [`$waiting.${reservation}.expiresAt`, '$$NOW'] } }),
  };
}

async function attemptOnce(
  collection: LockCollection,
  sessions: SessionSource,
  request: AcquireAttemptRequest,
): Promise<AcquireAttemptOutcome> {
  const mode = request.target?.mode ?? EXCLUSIVE;
  // A waiting attempt may have to record its place in line, or confirm a grant to it.
  if (isEntryMode(mode) || request.reservation !== undefined) {
    const use = request.reservationUse;
    if (!isEntryMode(mode) && use?.plainFirst && !use.confirmsGrant) {
      const plain = await attemptPlain(collection, sessions, request);
      if (plain) return plain;
    }
    const confirmed =
      !isEntryMode(mode) && use?.confirmsGrant
        ? await confirmGrant(collection, sessions, request, request.reservation!)
        : undefined;
    return confirmed ?? attemptInAnyMode(collection, sessions, request, mode);
  }
  // Most keys are plain mutexes: the small pipeline decides those, and leaves a key with
  // holder entries or reservations to the full one (a second round trip).
  const plain = await attemptPlain(collection, sessions, request);
  return plain ?? attemptInAnyMode(collection, sessions, request, mode);
}

/** No live holder entry and no live reservation: the key is a plain exclusive lock now. */
const PLAIN_KEY = {
  $and: [{ $eq: [{ $size: LIVE_HOLDERS }, 0] }, { $eq: [{ $size: LIVE_RESERVATIONS }, 0] }],
};

/** The plain key is free: nobody holds it, or the lease ended by the server clock. */
const PLAIN_AND_FREE = {
  $and: [
    PLAIN_KEY,
    { $or: [{ $eq: [{ $ifNull: ['$owner', null] }, null] }, { $lte: ['$expiresAt', '$$NOW'] }] },
  ],
};

/** Each field takes its new value when the plain key is free (`_f`) and keeps its old one otherwise. */
function whenFree(newValue: unknown, oldValue: string) {
  return { $cond: ['$_f', newValue, oldValue] };
}

function plainPipeline({ owner, holder, ttlMs, target }: AcquireAttemptRequest) {
  // `free` is decided once, in its own stage; every field then reads it and the document as it
  // was. When the key is held, each field is set to itself and `_f` goes again: the server
  // sees a no-op, writes nothing to the oplog, and no change event wakes anyone.
  return [
    { $set: { _f: PLAIN_AND_FREE } },
    {
      $set: {
        owner: whenFree(owner, '$owner'),
        holder: whenFree(holder, '$holder'),
        fence: whenFree(NEXT_FENCE, '$fence'),
        acquiredAt: whenFree('$$NOW', '$acquiredAt'),
        expiresAt: whenFree({ $add: ['$$NOW', ttlMs] }, '$expiresAt'),
        gcAt: whenFree(null, '$gcAt'),
        scope: whenFree({ $literal: target?.scope ?? null }, '$scope'),
        // A grant that ran out unconfirmed leaves its marks: the next grant must change them.
        grantedTo: whenFree(cleared('$grantedTo'), '$grantedTo'),
        grantee: whenFree(cleared('$grantee'), '$grantee'),
      },
    },
    { $unset: '_f' },
  ];
}

/**
 * An exclusive attempt on a plain key, in the pipeline the mutex always had; `undefined` when
 * the key has holder entries or reservations (nothing was written then).
 */
async function attemptPlain(
  collection: LockCollection,
  sessions: SessionSource,
  request: AcquireAttemptRequest,
): Promise<AcquireAttemptOutcome | undefined> {
  const session = sessions.startSession({ causalConsistency: true });
  try {
    const sentAt = performance.now();
    const reply = (await collection.findOneAndUpdate({ _id: request.key }, plainPipeline(request), {
      upsert: true,
      returnDocument: 'after',
      projection: {
        owner: 1,
        holder: 1,
        fence: 1,
        grantedTo: 1,
        remainingMs: REMAINING_LEASE_MS,
        plain: PLAIN_KEY,
      },
      session,
    })) as (PlainReply & { plain: boolean }) | null;
    if (reply === null) throw new Error(`Upsert of lock ${request.key} returned no document`);
    const base = {
      key: request.key,
      sentAt,
      remainingMs: toRemainingMs(reply.remainingMs),
      operationTime: session.operationTime,
    };
    // Ours and live: won now, or by an earlier try whose reply was lost. Ours but ended (on a
    // key that is not plain, else this attempt would have taken it anew): not a win.
    if (reply.owner === request.owner && base.remainingMs > 0) {
      const fence = toBigInt(reply.fence);
      return { ...base, won: true, holderId: request.holder, owner: request.owner, fence };
    }
    if (!reply.plain) return undefined;
    return {
      ...base,
      won: false,
      plainOnly: true,
      holderId: reply.holder ?? null,
      ...(isGrantPending(reply) ? { grantPendingTo: reply.grantedTo! } : {}),
    };
  } finally {
    await session.endSession();
  }
}

/**
 * Takes a live grant to `reservation` (see `direct-grant.ts`) as the full attempt would: our
 * token and full lease in place of the placeholder, the grant's fence, its marks cleared, our
 * place in line dropped (or moved to the back while more wait here), expired places dropped.
 * A small command instead of the attempt's pipeline for every case: this is the second write
 * of every hand-off between processes. `undefined` when the key is not granted to us (nothing
 * was written); the full attempt then decides.
 */
async function confirmGrant(
  collection: LockCollection,
  sessions: SessionSource,
  request: AcquireAttemptRequest,
  reservation: string,
): Promise<AcquireAttemptWon | undefined> {
  const { owner, holder, ttlMs, reservationUse } = request;
  const others = {
    $filter: { input: LIVE_RESERVATIONS, cond: { $ne: ['$$this.k', reservation] } },
  };
  const ours = {
    k: reservation,
    v: {
      weight: MAX_HOLDERS_PER_KEY,
      since: '$$NOW',
      expiresAt: { $add: ['$$NOW', RESERVATION_TTL_MS] },
      ...(reservationUse?.grantable ? { holder } : {}),
    },
  };
  const session = sessions.startSession({ causalConsistency: true });
  try {
    const sentAt = performance.now();
    const reply = (await collection.findOneAndUpdate(
      {
        _id: request.key,
        grantedTo: reservation,
        $expr: pendingGrantTo(reservation, reservationUse?.exceptGrant),
      },
      [
        {
          $set: {
            owner,
            holder,
            expiresAt: { $add: ['$$NOW', ttlMs] },
            scope: { $literal: request.target?.scope ?? null },
            grantedTo: null,
            grantee: null,
            waiting: {
              $arrayToObject: reservationUse?.keep ? { $concatArrays: [others, [ours]] } : others,
            },
          },
        },
      ],
      {
        returnDocument: 'after',
        projection: {
          fence: 1,
          remainingMs: REMAINING_LEASE_MS,
          reservedMs: { $subtract: [`$waiting.${reservation}.expiresAt`, '$$NOW'] },
        },
        session,
      },
    )) as { fence: BsonInteger; remainingMs: BsonInteger; reservedMs?: BsonInteger | null } | null;
    if (reply === null) return undefined;
    return {
      key: request.key,
      sentAt,
      remainingMs: toRemainingMs(reply.remainingMs),
      operationTime: session.operationTime,
      won: true,
      holderId: holder,
      owner,
      fence: toBigInt(reply.fence),
      reservedMs: toRemainingMs(reply.reservedMs),
    };
  } finally {
    await session.endSession();
  }
}

interface PlainReply {
  owner: string | null;
  holder: string | null;
  fence: BsonInteger;
  grantedTo?: string | null;
  remainingMs: BsonInteger;
}

/** An attempt in any mode, with fairness reservations (see `attemptPipeline`). */
async function attemptInAnyMode(
  collection: LockCollection,
  sessions: SessionSource,
  request: AcquireAttemptRequest,
  mode: LockModeRequest,
): Promise<AcquireAttemptOutcome> {
  const { reservation } = request;
  // A causally consistent session records the reply's operationTime; starting one sends nothing.
  const session = sessions.startSession({ causalConsistency: true });
  try {
    const sentAt = performance.now();
    const reply = (await collection.findOneAndUpdate(
      { _id: request.key },
      attemptPipeline({
        owner: request.owner,
        holder: request.holder,
        ttlMs: request.ttlMs,
        mode,
        scope: request.target?.scope,
        reservation,
        reservationUse: request.reservationUse,
      }),
      {
        upsert: true,
        returnDocument: 'after',
        projection: replyProjection(request, mode, reservation),
        session,
      },
    )) as AttemptReply | null;
    if (reply === null) throw new Error(`Upsert of lock ${request.key} returned no document`);
    return toOutcome(request, mode, reply, sentAt, session.operationTime);
  } finally {
    await session.endSession();
  }
}

function toOutcome(
  request: AcquireAttemptRequest,
  mode: LockModeRequest,
  reply: AttemptReply,
  sentAt: number,
  operationTime: Timestamp | undefined,
): AcquireAttemptOutcome {
  const { key, owner } = request;
  if (reply.conflict) {
    const permits = reply.permits == null ? null : toBigInt(reply.permits);
    throw modeConflictError(key, mode, { exclusiveLive: reply.exclusiveLive, permits });
  }
  const reserved =
    request.reservation === undefined ? {} : { reservedMs: toRemainingMs(reply.reservedMs) };
  const won = (remainingMs: number, fence: BsonInteger): AcquireAttemptWon => ({
    key,
    sentAt,
    remainingMs,
    operationTime,
    won: true,
    holderId: request.holder,
    owner,
    fence: toBigInt(fence),
    ...reserved,
  });
  const entry = reply.entry;
  if (isEntryMode(mode) && entry?.owner === owner && entry.releasedAt == null) {
    // Our entry, unless its lease ended: a retry of an attempt that won long ago.
    const remainingMs = toRemainingMs(reply.entryRemainingMs);
    if (remainingMs > 0) return won(remainingMs, entry.fence);
  }
  if (!isEntryMode(mode) && reply.owner === owner && reply.exclusiveLive) {
    return won(toRemainingMs(reply.remainingMs), reply.fence);
  }
  // At the cap the key is busy like any other: the caller waits (for the earliest lease to
  // end, or a holder to leave) until its timeout, and is told why if that passes.
  const atHolderCap =
    isEntryMode(mode) && toBigInt(reply.liveHolders) >= BigInt(MAX_HOLDERS_PER_KEY);
  return {
    key,
    sentAt,
    remainingMs: toRemainingMs(reply.waitMs),
    operationTime,
    won: false,
    holderId: reply.exclusiveLive ? (reply.holder ?? null) : null,
    ...(atHolderCap ? { atHolderCap } : {}),
    ...(reply.exclusiveLive && isGrantPending(reply) ? { grantPendingTo: reply.grantedTo! } : {}),
    ...reserved,
  };
}
