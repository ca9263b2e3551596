import { toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import type { LockCollection } from './lock-document';
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

interface ReleaseReply {
  ours: boolean;
  remainingMs: BsonInteger;
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
  const ours = [{ owner, until: '$expiresAt' }];
  const withOurs = { $slice: [{ $concatArrays: [previous, ours] }, -RELEASED_OWNERS_KEPT] };
  return [
    {
      $set: {
        owner: whenOurs(owner, null, '$owner'),
        // Not before the lease would have ended: a retried release must still find the document.
        // Never while shared holders live: an ended exclusive lease may be given back after
        // readers came in.
        gcAt: whenOurs(
          owner,
          {
            $cond: [
              { $gt: [{ $size: LIVE_HOLDERS }, 0] },
              '$gcAt',
              { $max: [{ $add: ['$$NOW', idleRetentionMs] }, '$expiresAt'] },
            ],
          },
          '$gcAt',
        ),
        // Lets a retried release recognise its own earlier success (a lost reply, a
        // write-concern error after the write), even after others took and released the key
        // meanwhile; kept only for a release of a live lease.
        releasedOwners: whenOurs(owner, { $cond: [live, withOurs, previous] }, '$releasedOwners'),
        // Who released which acquisition, for `events$` (the change event carries them).
        releasedHolder: whenOurs(owner, '$holder', '$releasedHolder'),
        releasedFence: whenOurs(owner, '$fence', '$releasedFence'),
      },
    },
  ];
}

/**
 * Owner-checked release in one round trip: sets `owner` to null and schedules the idle
 * document for deletion. The pre-image says whether the lease was still live by the server
 * clock. Idempotent: repeating a release that already succeeded, before its lease would have
 * ended, reports `released` again (unless more than {@link RELEASED_OWNERS_KEPT} other
 * releases of the key came in between) and writes nothing.
 *
 * @example
 * if ((await releaseLease(collection, { key, owner, idleRetentionMs })) !== 'released') reportLost();
 */
export async function releaseLease(
  collection: LockCollection,
  { key, owner, idleRetentionMs }: ReleaseLeaseRequest,
): Promise<ReleaseLeaseOutcome> {
  const before = (await collection.findOneAndUpdate(
    { _id: key, $or: [{ owner }, { 'releasedOwners.owner': owner }] },
    releasePipeline(owner, idleRetentionMs),
    {
      returnDocument: 'before',
      projection: {
        _id: 0,
        ours: { $eq: ['$owner', owner] },
        remainingMs: { $subtract: ['$expiresAt', '$$NOW'] },
      },
    },
  )) as ReleaseReply | null;
  if (before === null) return 'lost';
  if (!before.ours) return 'released'; // released by an earlier try, while live
  return toRemainingMs(before.remainingMs) > 0 ? 'released' : 'expired';
}
