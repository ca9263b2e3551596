import { REMAINING_LEASE_MS, toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import { isGrantToken } from './direct-grant';
import type { LockCollection } from './lock-document';

export interface RenewLeaseRequest {
  key: string;
  owner: string;
  ttlMs: number;
}

export type RenewLeaseOutcome =
  { renewed: true; sentAt: number; remainingMs: number } | { renewed: false; sentAt: number };

/**
 * Extends a lease we still own, in one round trip. Matches only while the lease is live by
 * the server clock: an expired lease is lost even if nobody has taken it yet, because
 * someone could have. A lease held under a grant's placeholder (handed out on the grant's
 * change event, see `KeyQueue`) is also confirmed: the grant's marks go, so that nobody takes
 * it for a pending grant any more.
 *
 * @example
 * const outcome = await renewLease(collection, { key, owner, ttlMs: 30_000 });
 * if (!outcome.renewed) markLost();
 */
export async function renewLease(
  collection: LockCollection,
  { key, owner, ttlMs }: RenewLeaseRequest,
): Promise<RenewLeaseOutcome> {
  const sentAt = performance.now();
  const reply = (await collection.findOneAndUpdate(
    { _id: key, owner, $expr: { $gt: ['$expiresAt', '$$NOW'] } },
    [
      {
        $set: {
          expiresAt: { $add: ['$$NOW', ttlMs] },
          ...(isGrantToken(owner) ? { grantedTo: null, grantee: null } : {}),
        },
      },
    ],
    { returnDocument: 'after', projection: { _id: 0, remainingMs: REMAINING_LEASE_MS } },
  )) as { remainingMs: BsonInteger } | null;
  if (reply === null) return { renewed: false, sentAt };
  return { renewed: true, sentAt, remainingMs: toRemainingMs(reply.remainingMs) };
}
