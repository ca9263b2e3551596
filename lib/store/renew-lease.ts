import { REMAINING_LEASE_MS, toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
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
 * someone could have.
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
    [{ $set: { expiresAt: { $add: ['$$NOW', ttlMs] } } }],
    { returnDocument: 'after', projection: { _id: 0, remainingMs: REMAINING_LEASE_MS } },
  )) as { remainingMs: BsonInteger } | null;
  if (reply === null) return { renewed: false, sentAt };
  return { renewed: true, sentAt, remainingMs: toRemainingMs(reply.remainingMs) };
}
