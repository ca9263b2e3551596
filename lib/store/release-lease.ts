import { toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import type { LockCollection } from './lock-document';

export interface ReleaseLeaseRequest {
  key: string;
  owner: string;
  idleRetentionMs: number;
}

/**
 * - `released`: we held a live lease and gave it up.
 * - `expired`: the token was still ours but the lease had ended; the document is freed
 *   anyway, yet the holder was unprotected for a while, so this counts as lost.
 * - `lost`: someone else holds the key now, or it was already released.
 */
export type ReleaseLeaseOutcome = 'released' | 'expired' | 'lost';

/**
 * Owner-checked release in one round trip: sets `owner` to null and schedules the idle
 * document for deletion. The pre-image's remaining lease (by the server clock) says whether
 * the lease was still live.
 *
 * @example
 * if ((await releaseLease(collection, { key, owner, idleRetentionMs })) !== 'released') reportLost();
 */
export async function releaseLease(
  collection: LockCollection,
  { key, owner, idleRetentionMs }: ReleaseLeaseRequest,
): Promise<ReleaseLeaseOutcome> {
  const before = (await collection.findOneAndUpdate(
    { _id: key, owner },
    [{ $set: { owner: null, gcAt: { $add: ['$$NOW', idleRetentionMs] } } }],
    {
      returnDocument: 'before',
      projection: { _id: 0, remainingMs: { $subtract: ['$expiresAt', '$$NOW'] } },
    },
  )) as { remainingMs: BsonInteger } | null;
  if (before === null) return 'lost';
  return toRemainingMs(before.remainingMs) > 0 ? 'released' : 'expired';
}
