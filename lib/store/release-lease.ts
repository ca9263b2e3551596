import { Long } from 'mongodb';
import { toBigInt, toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import type { LockCollection } from './lock-document';
import {
  FENCE_BLOCK,
  cleared,
  gcNotBeforeNextFence,
  grantFields,
  grantingExpr,
  grantableHead,
  lastReservedFence,
} from './direct-grant';
import { LIVE_HOLDERS, LIVE_RESERVATIONS, isNullExpr } from './lock-modes';

export interface ReleaseLeaseRequest {
  key: string;
  owner: string;
  /**
   * The fence of the lease being released, when known: a retry is then recognised only by the
   * release of that lease, not by an earlier one of the same token (see `recognisedRelease`).
   */
  fence?: bigint;
  idleRetentionMs: number;
  /** A caller waiting in this process, to which the release may pass the lock. */
  successor?: LocalSuccessor;
}

/** What a release knows beyond its key and owner token. */
export type ReleaseOptions = Pick<ReleaseLeaseRequest, 'fence' | 'successor'>;

/**
 * A local transfer by write: the release passes the lock to a caller waiting in the same
 * process, in the same write (its token, a new lease and block of fences). No change event
 * wakes anyone. (A transfer within a lease's block of fences needs no write at all.)
 */
export interface LocalSuccessor {
  owner: string;
  /** The releasing process's holder id (it stays the holder). */
  holder: string;
  ttlMs: number;
  scope: string | null;
}

/**
 * - `released`: we held a live lease and gave it up (now, or in an earlier try of this
 *   release whose reply was lost).
 * - `expired`: the token was still ours but the lease had ended; the document is freed
 *   anyway, yet the holder was unprotected for a while, so this counts as lost.
 * - `lost`: someone else holds the key now, or it was freed without us.
 */
export type ReleaseLeaseOutcome = 'released' | 'expired' | 'lost';

/** A release's outcome, and where the lock went in the same write, if anywhere. */
export interface ReleaseResult {
  outcome: ReleaseLeaseOutcome;
  /** Holder id of the waiting process the lock was granted to (see `direct-grant.ts`). */
  grantedTo?: string;
  /**
   * With `grantedTo`: a lower bound of the grant's fence (past the released lease's block), so
   * that a process which already took this grant can tell its news is old.
   */
  grantFence?: bigint;
  /** The successor holds the lock now, with this fence, its lease counted from `sentAt`. */
  transferred?: { fence: bigint; sentAt: number };
}

interface ReleaseReply {
  ours: boolean;
  recognised: boolean;
  remainingMs: BsonInteger;
  grantee: string | null;
  transfer: boolean;
  fence: BsonInteger;
}

/**
 * Whether the release passes the lock to `successor`. Decided on the document alone, not the
 * clock, so that the reply (read from the pre-image) says exactly what the write did: ours,
 * and no unreleased holder entry (a shared holder may have come in after our lease ended).
 */
function transferExpr(owner: string, successor: LocalSuccessor | undefined) {
  if (successor === undefined) return { $literal: false };
  const unreleased = {
    $filter: {
      input: { $objectToArray: { $ifNull: ['$holders', {}] } },
      cond: isNullExpr('$$this.v.releasedAt'),
    },
  };
  return { $and: [{ $eq: ['$owner', owner] }, { $eq: [{ $size: unreleased }, 0] }] };
}

const NOW = '$$NOW';

/**
 * Working fields of the release pipeline: each is computed once, in a stage before the ones
 * that read it, and unset at the end, so that the command every hand-off sends stays small.
 */
const OURS = '$_o';
const LINE = '$_w';
const HEAD = '$_h';
const TRANSFER = '$_t';
const SLOT = '$_ri';
const GRANTING = '$_g';

/** Each field takes its new value when we own the document and keeps its old one otherwise. */
function whenOurs(newValue: unknown, field: string) {
  return { $cond: [OURS, newValue, field] };
}

/**
 * Most releases of live leases remembered per key, so that a retried release recognises its
 * own (see `recognisedRelease`).
 */
export const RELEASED_OWNERS_KEPT = 32;

/**
 * `releasedOwners` with our release written in the slot `_ri` (see `releaseSlot`): the last
 * {@link RELEASED_OWNERS_KEPT} releases as a ring, so that a release changes one entry, not
 * the whole list (the write, and the change event every waiting process may read, stay small
 * however many releases came before).
 */
function withOurRelease(owner: string, fence: unknown) {
  const ring = { $ifNull: ['$releasedOwners', []] };
  return {
    $concatArrays: [
      { $cond: [{ $eq: [SLOT, 0] }, [], { $slice: [ring, SLOT] }] },
      [{ owner, fence, until: '$expiresAt' }],
      { $slice: [ring, { $add: [SLOT, 1] }, RELEASED_OWNERS_KEPT] },
    ],
  };
}

/**
 * The ring's slot for the next release: the end of a list not yet full, else `releasedNext`
 * (a full list written before the ring, oldest first, starts at 0). Appending while the list
 * is short also keeps the newest entries when an earlier version shortened the list.
 */
function releaseSlot() {
  const size = { $size: { $ifNull: ['$releasedOwners', []] } };
  const next = { $ifNull: ['$releasedNext', 0] };
  return {
    $cond: [
      { $lt: [size, RELEASED_OWNERS_KEPT] },
      size,
      { $cond: [{ $gte: [next, RELEASED_OWNERS_KEPT] }, 0, next] },
    ],
  };
}

/**
 * Whether the ring remembers the release this retry repeats. One token serves every attempt of
 * an acquisition call, which may give a key back and take it again (a late win, a lease that
 * ran out before the hand-out), and that later lease may have been lost. So a release that
 * knows its lease's fence is recognised by that fence alone (only releases of live leases are
 * kept); one that does not (a give-back of a win nobody heard of) by its token, and only until
 * that lease would have ended.
 */
export function recognisedRelease(
  owner: string,
  fence: bigint | undefined,
  releasedOwners: unknown = '$releasedOwners',
) {
  const sameLease = [
    { $eq: ['$$this.owner', owner] },
    fence === undefined
      ? { $gt: ['$$this.until', NOW] }
      : { $eq: ['$$this.fence', Long.fromBigInt(fence)] },
  ];
  const ours = {
    $filter: { input: { $ifNull: [releasedOwners, []] }, cond: { $and: sameLease } },
  };
  return { $gt: [{ $size: ours }, 0] };
}

/**
 * The live reservations (as `[{ k, v }]`) with the place of process `holder` moved to the back
 * of the line (`since` now): it has had its turn.
 */
function withPlaceAtBack(holder: unknown) {
  return {
    $map: {
      input: LIVE_RESERVATIONS,
      in: {
        $cond: [
          { $eq: [{ $ifNull: ['$$this.v.holder', null] }, holder] },
          { k: '$$this.k', v: { $mergeObjects: ['$$this.v', { since: NOW }] } },
          '$$this',
        ],
      },
    },
  };
}

/**
 * The line a release by the holder hands the lock along: the releasing process's own place at
 * the back, since its callers have just had its turn (several of them, perhaps, passed the lock
 * on without a write).
 */
const LINE_AFTER_OUR_TURN = withPlaceAtBack('$holder');

/**
 * The fence the release ends: the document's, or, for a caller handed the lock without a write
 * (a later fence of the same lease's block, see `FENCES_PER_LEASE`), the caller's own.
 */
function releasedFence(fence: bigint | undefined) {
  return fence === undefined ? '$fence' : { $max: ['$fence', Long.fromBigInt(fence)] };
}

export function releasePipeline(
  owner: string,
  idleRetentionMs: number,
  successor?: LocalSuccessor,
  fence?: bigint,
) {
  const live = { $gt: ['$expiresAt', '$$NOW'] };
  // Remembered only for a live lease: a retry after the lease's end could not have been
  // protected anyway.
  const remembered = { $and: [OURS, live] };
  // Not before the lease would have ended: a retried release must still find the document.
  // Never while shared holders live: an ended exclusive lease may be given back after readers
  // came in.
  const idleGcAt = {
    $cond: [
      { $gt: [{ $size: LIVE_HOLDERS }, 0] },
      '$gcAt',
      gcNotBeforeNextFence({ $max: [{ $add: ['$$NOW', idleRetentionMs] }, '$expiresAt'] }),
    ],
  };
  const transfer = (toSuccessor: unknown, field: unknown) =>
    successor === undefined ? field : { $cond: [TRANSFER, toSuccessor, field] };
  return [
    {
      $set: {
        _o: { $eq: ['$owner', owner] },
        _w: LINE_AFTER_OUR_TURN,
        _t: transferExpr(owner, successor),
        _ri: releaseSlot(),
      },
    },
    { $set: { _h: grantableHead(undefined, LINE) } },
    // Decided once, read by every field of the grant.
    { $set: { _g: grantingExpr({ $and: [OURS, { $not: [TRANSFER] }] }, HEAD) } },
    {
      $set: {
        // Ours: passed to the local successor, or handed to the oldest waiting process, or
        // freed; otherwise left as it is.
        ...grantFields(
          GRANTING,
          HEAD,
          {
            owner: transfer(successor?.owner, whenOurs(null, '$owner')),
            holder: '$holder',
            fence: transfer({ $add: ['$fence', FENCE_BLOCK] }, '$fence'),
            acquiredAt: transfer(NOW, '$acquiredAt'),
            expiresAt: transfer({ $add: [NOW, successor?.ttlMs ?? 0] }, '$expiresAt'),
            scope: transfer({ $literal: successor?.scope ?? null }, '$scope'),
            gcAt: transfer('$gcAt', whenOurs(idleGcAt, '$gcAt')),
            // A transfer is this process's turn: its place goes to the back of the line.
            waiting: transfer(
              { $cond: [isNullExpr('$waiting'), '$waiting', { $arrayToObject: LINE }] },
              '$waiting',
            ),
            grantedTo: whenOurs(cleared('$grantedTo'), '$grantedTo'),
            grantee: whenOurs(cleared('$grantee'), '$grantee'),
          },
          LINE,
        ),
        // Lets a retried release recognise its own earlier success (a lost reply, a
        // write-concern error after the write), even after others took and released the key
        // meanwhile; kept only for a release of a live lease.
        releasedOwners: {
          $cond: [remembered, withOurRelease(owner, releasedFence(fence)), '$releasedOwners'],
        },
        releasedNext: {
          $cond: [
            remembered,
            { $cond: [{ $gte: [SLOT, RELEASED_OWNERS_KEPT - 1] }, 0, { $add: [SLOT, 1] }] },
            '$releasedNext',
          ],
        },
        // Who released which acquisition, for `events$` (the change event carries them).
        releasedHolder: whenOurs('$holder', '$releasedHolder'),
        releasedFence: whenOurs(releasedFence(fence), '$releasedFence'),
      },
    },
    { $unset: ['_o', '_w', '_h', '_t', '_ri', '_g'] },
  ];
}

/**
 * Owner-checked release in one round trip: hands the lock to the oldest waiting process (see
 * `direct-grant.ts`), or sets `owner` to null and schedules the idle document for deletion.
 * The pre-image says whether the lease was still live by the server clock. Idempotent:
 * repeating a release that already succeeded reports `released` again and writes nothing, as
 * long as the key remembers it: by `fence`, while fewer than {@link RELEASED_OWNERS_KEPT} other
 * releases of the key came in between; by token alone, also only before its lease would have
 * ended.
 *
 * @example
 * const { outcome } = await releaseLease(collection, { key, owner, idleRetentionMs });
 * if (outcome !== 'released') reportLost();
 */
export async function releaseLease(
  collection: LockCollection,
  { key, owner, fence, idleRetentionMs, successor }: ReleaseLeaseRequest,
): Promise<ReleaseResult> {
  const sentAt = performance.now();
  const before = (await collection.findOneAndUpdate(
    { _id: key, $or: [{ owner }, { 'releasedOwners.owner': owner }] },
    releasePipeline(owner, idleRetentionMs, successor, fence),
    {
      returnDocument: 'before',
      projection: {
        _id: 0,
        ours: { $eq: ['$owner', owner] },
        recognised: recognisedRelease(owner, fence),
        remainingMs: { $subtract: ['$expiresAt', '$$NOW'] },
        // Who the write handed the lock to, read from the same pre-image (a hint for local
        // waiters: they need not try when it went elsewhere).
        grantee: {
          $let: {
            vars: { head: grantableHead(undefined, LINE_AFTER_OUR_TURN) },
            in: { $ifNull: ['$$head.v.holder', null] },
          },
        },
        transfer: transferExpr(owner, successor),
        fence: 1,
      },
    },
  )) as ReleaseReply | null;
  if (before === null) return { outcome: 'lost' };
  // Released by an earlier try, while live.
  if (!before.ours) return { outcome: before.recognised ? 'released' : 'lost' };
  const outcome = toRemainingMs(before.remainingMs) > 0 ? 'released' : 'expired';
  if (before.transfer) {
    return {
      outcome,
      transferred: { fence: lastReservedFence(toBigInt(before.fence)) + 1n, sentAt },
    };
  }
  if (before.grantee === null) return { outcome };
  const grantFence = lastReservedFence(toBigInt(before.fence)) + 1n;
  return { outcome, grantedTo: before.grantee, grantFence };
}
