import { toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import type { LockCollection } from './lock-document';
import { cleared, grantFields, grantableHead } from './direct-grant';
import { LIVE_HOLDERS } from './lock-modes';

export interface ReleaseLeaseRequest {
  key: string;
  owner: string;
  idleRetentionMs: number;
}

/**
 * - `released`: we held a live lease and gave it up (now, or in an earlier try of this
 *   release whose reply was lost).
 * - `expired`: the token was still ours but the lease had ended; the document is freed
 *   anyway, yet the holder was unprotected for a while, so this counts as lost.
 * - `lost`: someone else holds the key now, or it was freed without us.
 */
export type ReleaseLeaseOutcome = 'released' | 'expired' | 'lost';

/** A release's outcome, and the process the key was granted to in the same write, if any. */
export interface ReleaseResult {
  outcome: ReleaseLeaseOutcome;
  /** Holder id of the waiting process the lock went to (see `direct-grant.ts`). */
  grantedTo?: string;
}

interface ReleaseReply {
  ours: boolean;
  remainingMs: BsonInteger;
  grantee: string | null;
}

/** Each field takes its new value when we own the document and keeps its old one otherwise. */
function whenOurs(owner: string, newValue: unknown, field: string) {
  return { $cond: [{ $eq: ['$owner', owner] }, newValue, field] };
}

/**
 * Most releases of live leases remembered per key (each until its lease would have ended), so
 * that a retried release recognises its own.
 */
export const RELEASED_OWNERS_KEPT = 32;

function releasePipeline(owner: string, idleRetentionMs: number) {
  const live = { $gt: ['$expiresAt', '$$NOW'] };
  // A retry after the lease's end could not have been protected anyway: forget it then.
  const previous = {
    $filter: {
      input: { $ifNull: ['$releasedOwners', []] },
      cond: { $gt: ['$$this.until', '$$NOW'] },
    },
  };
  const ourRelease = [{ owner, until: '$expiresAt' }];
  const withOurs = { $slice: [{ $concatArrays: [previous, ourRelease] }, -RELEASED_OWNERS_KEPT] };
  const ours = { $eq: ['$owner', owner] };
  // Not before the lease would have ended: a retried release must still find the document.
  // Never while shared holders live: an ended exclusive lease may be given back after readers
  // came in.
  const idleGcAt = {
    $cond: [
      { $gt: [{ $size: LIVE_HOLDERS }, 0] },
      '$gcAt',
      { $max: [{ $add: ['$$NOW', idleRetentionMs] }, '$expiresAt'] },
    ],
  };
  return [
    { $set: { _h: grantableHead() } },
    {
      $set: {
        // Ours: handed to the oldest waiting process, or freed; otherwise left as it is.
        ...grantFields(ours, '$_h', {
          owner: whenOurs(owner, null, '$owner'),
          holder: '$holder',
          fence: '$fence',
          acquiredAt: '$acquiredAt',
          expiresAt: '$expiresAt',
          scope: '$scope',
          gcAt: whenOurs(owner, idleGcAt, '$gcAt'),
          waiting: '$waiting',
          grantedTo: whenOurs(owner, cleared('$grantedTo'), '$grantedTo'),
          grantee: whenOurs(owner, cleared('$grantee'), '$grantee'),
        }),
        // Lets a retried release recognise its own earlier success (a lost reply, a
        // write-concern error after the write), even after others took and released the key
        // meanwhile; kept only for a release of a live lease.
        releasedOwners: whenOurs(owner, { $cond: [live, withOurs, previous] }, '$releasedOwners'),
        // Who released which acquisition, for `events$` (the change event carries them).
        releasedHolder: whenOurs(owner, '$holder', '$releasedHolder'),
        releasedFence: whenOurs(owner, '$fence', '$releasedFence'),
      },
    },
    { $unset: '_h' },
  ];
}

/**
 * Owner-checked release in one round trip: hands the lock to the oldest waiting process (see
 * `direct-grant.ts`), or sets `owner` to null and schedules the idle document for deletion.
 * The pre-image says whether the lease was still live by the server clock. Idempotent:
 * repeating a release that already succeeded, before its lease would have ended, reports
 * `released` again (unless more than {@link RELEASED_OWNERS_KEPT} other releases of the key
 * came in between) and writes nothing.
 *
 * @example
 * const { outcome } = await releaseLease(collection, { key, owner, idleRetentionMs });
 * if (outcome !== 'released') reportLost();
 */
export async function releaseLease(
  collection: LockCollection,
  { key, owner, idleRetentionMs }: ReleaseLeaseRequest,
): Promise<ReleaseResult> {
  const before = (await collection.findOneAndUpdate(
    { _id: key, $or: [{ owner }, { 'releasedOwners.owner': owner }] },
    releasePipeline(owner, idleRetentionMs),
    {
      returnDocument: 'before',
      projection: {
        _id: 0,
        ours: { $eq: ['$owner', owner] },
        remainingMs: { $subtract: ['$expiresAt', '$$NOW'] },
        // Who the write handed the lock to, read from the same pre-image (a hint for local
        // waiters: they need not try when it went elsewhere).
        grantee: {
          $let: { vars: { head: grantableHead() }, in: { $ifNull: ['$$head.v.holder', null] } },
        },
      },
    },
  )) as ReleaseReply | null;
  if (before === null) return { outcome: 'lost' };
  if (!before.ours) return { outcome: 'released' }; // released by an earlier try, while live
  const outcome = toRemainingMs(before.remainingMs) > 0 ? 'released' : 'expired';
  return before.grantee === null ? { outcome } : { outcome, grantedTo: before.grantee };
}
