import { REMAINING_LEASE_MS, toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import { grantedReservation, isGrantToken } from './direct-grant';
import type { LockCollection } from './lock-document';

export interface RenewLeaseRequest {
  key: string;
  owner: string;
  ttlMs: number;
  /**
   * With a grant's placeholder token: the renewal that confirms the grant also drops the
   * place in line it was granted to (nobody else waits for the key in this process), which
   * saves the queue's withdrawal.
   */
  leaveLine?: boolean;
}

export type RenewLeaseOutcome =
  { renewed: true; sentAt: number; remainingMs: number } | { renewed: false; sentAt: number };

/**
 * Extends a lease we still own, in one round trip. Matches only while the lease is live by
 * the server clock: an expired lease is lost even if nobody has taken it yet, because
 * someone could have. A lease held under a grant's placeholder (handed out on the grant's
 * change event, see `KeyQueue`) is also confirmed: the grant's marks go, so that nobody takes
 * it for a pending grant any more; with `leaveLine`, the place in line it went to goes too
 * (only then: a later renewal leaves a place written since alone).
 *
 * @example
 * const outcome = await renewLease(collection, { key, owner, ttlMs: 30_000 });
 * if (!outcome.renewed) markLost();
 */
export async function renewLease(
  collection: LockCollection,
  { key, owner, ttlMs, leaveLine }: RenewLeaseRequest,
): Promise<RenewLeaseOutcome> {
  const grant = isGrantToken(owner);
  const sentAt = performance.now();
  const reply = (await collection.findOneAndUpdate(
    { _id: key, owner, $expr: { $gt: ['$expiresAt', '$$NOW'] } },
    [
      {
        $set: {
          expiresAt: { $add: ['$$NOW', ttlMs] },
          ...(grant && leaveLine ? { waiting: withoutPlaceWhileGranted(owner) } : {}),
          ...(grant ? { grantedTo: null, grantee: null } : {}),
        },
      },
    ],
    { returnDocument: 'after', projection: { _id: 0, remainingMs: REMAINING_LEASE_MS } },
  )) as { remainingMs: BsonInteger } | null;
  if (reply === null) return { renewed: false, sentAt };
  return { renewed: true, sentAt, remainingMs: toRemainingMs(reply.remainingMs) };
}

/**
 * `waiting` without the place the grant went to, while the grant is still pending (the
 * confirming renewal); as it is otherwise.
 */
function withoutPlaceWhileGranted(token: string) {
  const reservation = grantedReservation(token);
  const others = {
    $filter: {
      input: { $objectToArray: { $ifNull: ['$waiting', {}] } },
      cond: { $ne: ['$$this.k', reservation] },
    },
  };
  return { $cond: [{ $eq: ['$grantedTo', reservation] }, { $arrayToObject: others }, '$waiting'] };
}
