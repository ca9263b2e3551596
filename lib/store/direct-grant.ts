import { Long } from 'mongodb';
import { LONG_ZERO, toBigInt } from './bson-values';
import type { BsonInteger } from './bson-values';
import { EXCLUSIVE_LIVE, LIVE_HOLDERS, LIVE_RESERVATIONS, isNullExpr, oldest } from './lock-modes';

/**
 * Direct grant: a write that frees an exclusive lock (a release, a withdrawal of an unconfirmed
 * grant, an attempt that finds the lease ended) hands it, in the same write, to the oldest live
 * reservation when that reservation waits for the exclusive lock. The grant names no caller: it
 * goes to the waiting process (`grantedTo`, its reservation; `grantee`, its holder id) under a
 * placeholder owner ({@link grantToken}), and that process's change stream reports it. Its queue
 * head takes the lock on the event under the placeholder, the first renewal confirming it (see
 * `KeyQueue`), or, where that is not safe, with one small command that writes its own token
 * (`confirmGrant` in `acquire-attempt.ts`; an exclusive attempt of that process that carries the
 * reservation takes it as well).
 *
 * A grant lease is short: a process that died after its last renewal of the reservation costs
 * the key at most this long.
 */
export const GRANT_LEASE_MS = 5_000;

const NOW = '$$NOW';

/**
 * The placeholder owner of a grant to `reservation` with `fence`: no caller holds it until its
 * process takes the grant, either by writing its own token in its place (`confirmGrant` in
 * `acquire-attempt.ts`) or, told of the grant by its change stream, by holding the lock under
 * this very token (see `KeyQueue`), which its first renewal confirms. The fence makes each
 * grant's token unique: a token handed out never names a later grant.
 */
export function grantToken(reservation: string, fence: bigint): string {
  return `grant:${reservation}:${fence}`;
}

/** The owner token is a grant's placeholder (see {@link grantToken}). */
export function isGrantToken(owner: string): boolean {
  return owner.startsWith('grant:');
}

/** The reservation a grant's placeholder token names. */
export function grantedReservation(token: string): string {
  return token.slice('grant:'.length, token.lastIndexOf(':'));
}

/** {@link grantToken} in a pipeline: the reservation's field path, the fence expression. */
function grantTokenExpr(reservation: unknown, fence: unknown) {
  return { $concat: ['grant:', reservation, ':', { $toString: fence }] };
}

/**
 * The lock is granted and not yet taken: `grantedTo` names the reservation and the owner is
 * still the grant's placeholder. (Taking the grant clears `grantedTo`; a lease held under a
 * handed-out placeholder keeps it as its owner token.)
 */
const GRANT_PENDING = {
  $eq: ['$owner', grantTokenExpr({ $ifNull: ['$grantedTo', ''] }, '$fence')],
};

/**
 * A live grant to `reservation`, not yet taken, other than `except` (the grant this process
 * handed out already, whose confirmation may not have landed: see `ReservationUse`).
 */
export function pendingGrantTo(reservation: string, except?: string) {
  return {
    $and: [
      { $eq: ['$grantedTo', reservation] },
      GRANT_PENDING,
      EXCLUSIVE_LIVE,
      ...(except === undefined ? [] : [{ $ne: ['$owner', except] }]),
    ],
  };
}

/** A reply's view of a grant: pending iff its placeholder is still the owner. */
export function isGrantPending(reply: {
  owner?: string | null;
  grantedTo?: string | null;
  fence?: BsonInteger | null;
}): boolean {
  const { owner, grantedTo, fence } = reply;
  return grantedTo != null && fence != null && owner === grantToken(grantedTo, toBigInt(fence));
}

/**
 * The reservation a freed exclusive lock goes to, as `{ k, v }`, or null: the oldest live
 * reservation of `line` (other than `except`), if it waits for the exclusive lock (only those carry their
 * process's holder id) and no shared or permit holder lives. Otherwise the lock is freed and
 * the waiters decide by their own attempts.
 */
export function grantableHead(except?: unknown, line: unknown = LIVE_RESERVATIONS) {
  const queue =
    except === undefined ? line : { $filter: { input: line, cond: { $ne: ['$$this.k', except] } } };
  return {
    $let: {
      vars: { head: oldest(queue) },
      in: {
        $cond: [
          {
            $and: [
              { $ne: ['$$head', null] },
              { $not: [isNullExpr('$$head.v.holder')] },
              { $eq: [{ $size: LIVE_HOLDERS }, 0] },
            ],
          },
          '$$head',
          null,
        ],
      },
    },
  };
}

/**
 * Null, or absent as it was: the marks of a grant (`grantedTo`, `grantee`) are cleared when the
 * lock is taken or freed, and never written on keys that had no grant.
 */
export function cleared(field: '$grantedTo' | '$grantee') {
  return { $cond: [isNullExpr(field), field, null] };
}

/**
 * The grant whose reservation `grantedTo` names ran out unconfirmed: its process died or
 * stalled. (The placeholder owner is still in place, so nobody took the lock since.)
 */
const LAPSED_GRANT = { $and: [{ $not: [EXCLUSIVE_LIVE] }, GRANT_PENDING] };

/**
 * Live reservations, less the one whose grant lapsed: it leaves the line, rather than take
 * the lock again (a dead process would cost another grant lease). If its process is alive, its
 * next attempt takes a new place at the back.
 */
export const LIVE_RESERVATIONS_BUT_LAPSED = {
  $filter: {
    input: LIVE_RESERVATIONS,
    cond: { $not: [{ $and: [LAPSED_GRANT, { $eq: ['$$this.k', '$grantedTo'] }] }] },
  },
};

/**
 * Fences each new lease reserves: its own and the next ones, which its process may hand to its
 * own waiting callers without a write (see `LockAcquirer`; `MAX_LOCAL_TRANSFERS` is one less).
 * The next lease written starts past the block, so every holder's fence is still larger than
 * all before it.
 */
export const FENCES_PER_LEASE = 17;

/** The last fence of the block a lease starting at `fence` reserved. */
export function lastReservedFence(fence: bigint): bigint {
  return fence + BigInt(FENCES_PER_LEASE) - 1n;
}

/** {@link FENCES_PER_LEASE} as the int64 it is added to. */
export const FENCE_BLOCK = Long.fromInt(FENCES_PER_LEASE);

/**
 * When an idle document may be deleted: at `gcAt`, and not before the clock in ms has passed
 * the key's next fence. Fences run ahead of the clock on a busy key, and a deleted document's
 * next fence is the clock (see {@link NEXT_FENCE}), which must still be above every fence the
 * key had.
 */
export function gcNotBeforeNextFence(gcAt: unknown) {
  const nextFence = { $add: [{ $ifNull: ['$fence', LONG_ZERO] }, FENCE_BLOCK] };
  return { $max: [gcAt, { $add: [new Date(0), nextFence] }] };
}

/**
 * Fence of a new lease: past the block the last one reserved, and never below the server's
 * clock in ms (a key whose idle document was deleted still gets a larger fence than before).
 */
export const NEXT_FENCE = {
  $max: [{ $add: [{ $ifNull: ['$fence', LONG_ZERO] }, FENCE_BLOCK] }, { $toLong: NOW }],
};

/**
 * The placeholder owner a grant to `head` (a field path of a `{ k, v }` reservation) writes,
 * with the grant's fence: only valid in the stage that sets `fence` to {@link NEXT_FENCE}.
 */
export function grantOwnerExpr(head: string) {
  return grantTokenExpr(head, NEXT_FENCE);
}

/**
 * Live reservations after a grant to `head`: the grantee goes to the back of the line (`since`
 * now), keeping its own expiry, which only its process renews; expired ones are dropped.
 */
export function toBackOfLine(queue: unknown, head: string) {
  return {
    $arrayToObject: {
      $map: {
        input: queue,
        in: {
          $cond: [
            { $eq: ['$$this.k', `${head}.k`] },
            { k: '$$this.k', v: { $mergeObjects: ['$$this.v', { since: NOW }] } },
            '$$this',
          ],
        },
      },
    },
  };
}

/** A write that frees the lock (`freeing`) hands it to `head`: there is a head to hand it to. */
export function grantingExpr(freeing: unknown, head: string) {
  return { $and: [freeing, { $ne: [{ $ifNull: [head, null] }, null] }] };
}

/**
 * The lock's fields when `granting` (see `grantingExpr`; a field path where a pipeline computed
 * it once) hands it to `head` (a field path holding `grantableHead()`'s value); each keeps
 * `otherwise` when it does not.
 */
export function grantFields(
  granting: unknown,
  head: string,
  otherwise: {
    owner: unknown;
    holder: unknown;
    fence: unknown;
    acquiredAt: unknown;
    expiresAt: unknown;
    scope: unknown;
    gcAt: unknown;
    waiting: unknown;
    grantedTo: unknown;
    grantee: unknown;
  },
  /** The live reservations the grantee is among (as `[{ k, v }]`). */
  queue: unknown = LIVE_RESERVATIONS,
) {
  const choose = (granted: unknown, other: unknown) => ({ $cond: [granting, granted, other] });
  return {
    owner: choose(grantOwnerExpr(`${head}.k`), otherwise.owner),
    holder: choose(`${head}.v.holder`, otherwise.holder),
    fence: choose(NEXT_FENCE, otherwise.fence),
    acquiredAt: choose(NOW, otherwise.acquiredAt),
    expiresAt: choose({ $add: [NOW, GRANT_LEASE_MS] }, otherwise.expiresAt),
    scope: choose(null, otherwise.scope),
    gcAt: choose(null, otherwise.gcAt),
    waiting: choose(toBackOfLine(queue, head), otherwise.waiting),
    grantedTo: choose(`${head}.k`, otherwise.grantedTo),
    grantee: choose(`${head}.v.holder`, otherwise.grantee),
  };
}
