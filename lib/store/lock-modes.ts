import { createHash, randomBytes } from 'node:crypto';

/**
 * How an acquisition holds a key.
 * - `exclusive`: the lock document's own lease (`owner`, `expiresAt`): nobody else holds.
 * - `shared`: one entry in `holders`; shared holders coexist, an exclusive one excludes them.
 * - a semaphore (`permits`): one entry in `holders` with its `weight`; the weights of the live
 *   entries never exceed `permits`.
 */
export interface LockModeRequest {
  mode: 'exclusive' | 'shared';
  /** A semaphore with this many permits; `undefined` for a lock. */
  permits: number | undefined;
  /** Permits taken (1 for a shared holder, unused when exclusive). */
  weight: number;
}

export const EXCLUSIVE: LockModeRequest = { mode: 'exclusive', permits: undefined, weight: 1 };

/**
 * Most live holder entries per key: each shared holder is one entry; a semaphore's permits are
 * capped by it too (every entry takes at least one permit), so a lock document stays small.
 */
export const MAX_HOLDERS_PER_KEY = 1_000;

/**
 * A waiting process's reservation lives this long without renewal: a crashed waiter stops
 * holding others back after at most this. Its process renews it at each attempt, and attempts
 * at least every third of it while waiting.
 */
export const RESERVATION_TTL_MS = 10_000;

/** How a waiting process's attempt uses its reservation (its place in the key's line). */
export interface ReservationUse {
  /** More callers wait in this process: a win keeps the reservation, at the back of the line. */
  keep: boolean;
  /**
   * The process hears of grants at once (its change stream runs): an exclusive waiter's
   * reservation then names its process, and a release may hand it the lock (`direct-grant.ts`).
   * A polling process takes the lock by its own attempts.
   */
  grantable: boolean;
  /**
   * The process heard of a grant to it: the attempt first sends the small command that takes
   * a grant to its reservation (`confirmGrant` in `acquire-attempt.ts`), and the full attempt
   * only if the key is not granted to it any more.
   */
  confirmsGrant?: boolean;
  /**
   * Nothing says the key is in use (the queue's first attempt, no other caller waiting here):
   * the mutex's small command decides a plain key, free or held (an uncontended acquire sends
   * about 3 KB instead of 10), and the loss says so (`plainOnly`): the queue then sends the
   * full attempt, which takes our place in line, as a command of its own. On a key with holder
   * entries or reservations the full attempt follows in the same call.
   */
  plainFirst?: boolean;
  /**
   * The placeholder token of the grant this process last handed to a caller without a write
   * (see `KeyQueue`): until that caller's first renewal lands the grant still looks pending,
   * and no attempt (nor the withdrawal) may take or drop it.
   */
  exceptGrant?: string;
}

/**
 * Owner tokens of holder entries carry this prefix, so every command of an acquisition (its
 * attempts, renewals, releases, and the give-backs of outcomes nobody heard) finds the lease
 * where its attempt put it without being told the mode again.
 */
const ENTRY_OWNER_PREFIX = 'e:';

/**
 * 128 random bits in hex. Not `randomUUID()`: Node builds that string from twenty pieces, and a
 * waiting caller would keep all of them (about 400 bytes; heap per waiter, BENCHMARKS.md).
 */
export function newOwnerToken(request: LockModeRequest): string {
  const token = randomBytes(16).toString('hex');
  return isEntryMode(request) ? `${ENTRY_OWNER_PREFIX}${token}` : token;
}

export function isEntryMode(request: LockModeRequest): boolean {
  return request.mode === 'shared' || request.permits !== undefined;
}

export function isEntryOwner(owner: string): boolean {
  return owner.startsWith(ENTRY_OWNER_PREFIX);
}

/**
 * The entry's field name in `holders`: derived from the token (so a retry finds it) but not
 * the token itself, which only its holder may know.
 */
export function entrySlot(owner: string): string {
  return `h${createHash('sha256').update(owner).digest('hex').slice(0, 24)}`;
}

const NOW = '$$NOW';

export const isNullExpr = (path: unknown) => ({ $eq: [{ $ifNull: [path, null] }, null] });

/** The exclusive lease (the document's own) is live. */
export const EXCLUSIVE_LIVE = {
  $and: [{ $not: [isNullExpr('$owner')] }, { $gt: ['$expiresAt', NOW] }],
};

/** Live, unreleased entries of `holders` as `[{ k, v }]`. */
export const LIVE_HOLDERS = {
  $filter: {
    input: { $objectToArray: { $ifNull: ['$holders', {}] } },
    cond: { $and: [{ $gt: ['$$this.v.expiresAt', NOW] }, isNullExpr('$$this.v.releasedAt')] },
  },
};

/**
 * Most released entries a grant keeps (each until its lease would have ended), so that a
 * retried release recognises its own success.
 */
export const RELEASED_ENTRIES_KEPT = 32;

/** Released entries whose lease would still run, the latest {@link RELEASED_ENTRIES_KEPT}. */
export const RECENT_RELEASES = {
  $slice: [
    {
      $filter: {
        input: { $objectToArray: { $ifNull: ['$holders', {}] } },
        cond: {
          $and: [
            { $gt: ['$$this.v.expiresAt', NOW] },
            { $not: [isNullExpr('$$this.v.releasedAt')] },
          ],
        },
      },
    },
    -RELEASED_ENTRIES_KEPT,
  ],
};

/** Unexpired reservations of `waiting` as `[{ k, v }]`. */
export const LIVE_RESERVATIONS = {
  $filter: {
    input: { $objectToArray: { $ifNull: ['$waiting', {}] } },
    cond: { $gt: ['$$this.v.expiresAt', NOW] },
  },
};

/** The oldest of `[{ k, v: { since } }]` (ties by name), or null. */
export function oldest(reservations: unknown) {
  const earlier = {
    $or: [
      { $lt: ['$$this.v.since', '$$value.v.since'] },
      {
        $and: [{ $eq: ['$$this.v.since', '$$value.v.since'] }, { $lt: ['$$this.k', '$$value.k'] }],
      },
    ],
  };
  return {
    $reduce: {
      input: reservations,
      initialValue: null,
      in: { $cond: [{ $or: [{ $eq: ['$$value', null] }, earlier] }, '$$this', '$$value'] },
    },
  };
}
