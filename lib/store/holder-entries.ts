import type { ClientSession } from 'mongodb';
import { toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import {
  cleared,
  gcNotBeforeNextFence,
  grantFields,
  grantingExpr,
  grantableHead,
  pendingGrantTo,
} from './direct-grant';
import type { LockCollection } from './lock-document';
import {
  EXCLUSIVE_LIVE,
  LIVE_HOLDERS,
  LIVE_RESERVATIONS,
  RESERVATION_TTL_MS,
  entrySlot,
  isNullExpr,
  oldest,
} from './lock-modes';
import type { ReleaseLeaseOutcome } from './release-lease';
import type { RenewLeaseOutcome } from './renew-lease';

const NOW = '$$NOW';

/** The latest lease end of any entry, released or not: a retried release must find the document. */
export const latestEntryEnd = {
  $max: { $map: { input: { $objectToArray: '$holders' }, in: '$$this.v.expiresAt' } },
};

/** A shared holder's or permit holder's lease: its entry in the key's `holders`. */
function entryPaths(owner: string) {
  const path = `holders.${entrySlot(owner)}`;
  return { path, live: { $gt: [`$${path}.expiresAt`, NOW] }, released: `$${path}.releasedAt` };
}

/** Renews a live, unreleased entry of ours, in one round trip (see `renewLease`). */
export async function renewEntry(
  collection: LockCollection,
  key: string,
  owner: string,
  ttlMs: number,
): Promise<RenewLeaseOutcome> {
  const { path, live, released } = entryPaths(owner);
  const sentAt = performance.now();
  const reply = (await collection.findOneAndUpdate(
    { _id: key, [`${path}.owner`]: owner, $expr: { $and: [live, isNullExpr(released)] } },
    // A live holder's document is never due for deletion.
    [{ $set: { [`${path}.expiresAt`]: { $add: [NOW, ttlMs] }, gcAt: null } }],
    {
      returnDocument: 'after',
      projection: {
        _id: 0,
        remainingMs: { $max: [0, { $subtract: [`$${path}.expiresAt`, NOW] }] },
      },
    },
  )) as { remainingMs: BsonInteger } | null;
  if (reply === null) return { renewed: false, sentAt };
  return { renewed: true, sentAt, remainingMs: toRemainingMs(reply.remainingMs) };
}

/**
 * Owner-checked release of an entry in one round trip: marks it released (`releasedAt`),
 * touching no other entry, and counts the release in `frees`, which is what waiters' change
 * streams look for. The marked entry stays until the key's next grant drops it, so a retried
 * release recognises its own success. When no live lease is left, the idle document is
 * scheduled for deletion as after an exclusive release.
 */
export async function releaseEntry(
  collection: LockCollection,
  key: string,
  owner: string,
  idleRetentionMs: number,
): Promise<ReleaseLeaseOutcome> {
  const { path, released } = entryPaths(owner);
  const alreadyReleased = { $not: [isNullExpr(released)] };
  const othersLive = {
    $gt: [
      { $size: { $filter: { input: LIVE_HOLDERS, cond: { $ne: ['$$this.v.owner', owner] } } } },
      0,
    ],
  };
  const before = (await collection.findOneAndUpdate(
    { _id: key, [`${path}.owner`]: owner },
    [
      {
        $set: {
          [`${path}.releasedAt`]: { $ifNull: [released, NOW] },
          frees: {
            $cond: [alreadyReleased, '$frees', { $add: [{ $ifNull: ['$frees', 0] }, 1] }],
          },
          releasedHolder: { $cond: [alreadyReleased, '$releasedHolder', `$${path}.holder`] },
          releasedFence: { $cond: [alreadyReleased, '$releasedFence', `$${path}.fence`] },
          gcAt: {
            $cond: [
              { $or: [alreadyReleased, othersLive, EXCLUSIVE_LIVE] },
              '$gcAt',
              // Not before any entry's lease would have ended: a retried release must find it.
              gcNotBeforeNextFence({ $max: [{ $add: [NOW, idleRetentionMs] }, latestEntryEnd] }),
            ],
          },
        },
      },
    ],
    {
      returnDocument: 'before',
      projection: {
        _id: 0,
        released: alreadyReleased,
        remainingMs: { $subtract: [`$${path}.expiresAt`, NOW] },
      },
    },
  )) as { released: boolean; remainingMs: BsonInteger } | null;
  if (before === null) return 'lost';
  if (before.released) return 'released'; // by an earlier try of this release
  return toRemainingMs(before.remainingMs) > 0 ? 'released' : 'expired';
}

/** Inside a transaction: our entry is live, proven by a write to it (see `confirmHeldIn`). */
export async function confirmEntryIn(
  collection: LockCollection,
  key: string,
  owner: string,
  session: ClientSession,
): Promise<boolean> {
  const { path, live, released } = entryPaths(owner);
  const result = await collection.updateOne(
    { _id: key, [`${path}.owner`]: owner, $expr: { $and: [live, isNullExpr(released)] } },
    [{ $set: { [`${path}.confirmedAt`]: NOW } }],
    { session },
  );
  return result.matchedCount === 1;
}

/**
 * Frees every live entry of `scope`, document by document: each write removes that document's
 * matching entries (so that their holders' renewals and releases find nothing and report the
 * loss) and reports how many it removed (see `releaseScope`).
 */
export async function releaseScopeEntries(
  collection: LockCollection,
  scope: string,
  idleRetentionMs: number,
): Promise<number> {
  const ofScope = {
    $filter: { input: LIVE_HOLDERS, cond: { $eq: ['$$this.v.scope', scope] } },
  };
  const keys = await collection
    .find(
      { holders: { $type: 'object' }, $expr: { $gt: [{ $size: ofScope }, 0] } },
      { projection: { _id: 1 } },
    )
    .toArray();
  let freed = 0;
  for (const { _id } of keys) {
    const kept = {
      $arrayToObject: {
        $filter: {
          input: { $objectToArray: '$holders' },
          cond: { $not: [{ $in: ['$$this.k', '$_n.k'] }] },
        },
      },
    };
    const before = (await collection.findOneAndUpdate(
      { _id },
      [
        { $set: { _n: ofScope } },
        {
          $set: {
            holders: { $cond: [{ $gt: [{ $size: '$_n' }, 0] }, kept, '$holders'] },
            frees: {
              $cond: [
                { $gt: [{ $size: '$_n' }, 0] },
                { $add: [{ $ifNull: ['$frees', 0] }, 1] },
                '$frees',
              ],
            },
            // The last live holders gone: the idle document is scheduled for deletion.
            gcAt: {
              $cond: [
                {
                  $and: [
                    { $gt: [{ $size: '$_n' }, 0] },
                    { $eq: [{ $size: LIVE_HOLDERS }, { $size: '$_n' }] },
                    { $not: [EXCLUSIVE_LIVE] },
                  ],
                },
                gcNotBeforeNextFence({ $max: [{ $add: [NOW, idleRetentionMs] }, latestEntryEnd] }),
                '$gcAt',
              ],
            },
          },
        },
        { $unset: '_n' },
      ],
      { returnDocument: 'before', projection: { _id: 0, count: { $size: ofScope } } },
    )) as { count: number } | null;
    freed += before?.count ?? 0;
  }
  return freed;
}

/**
 * A parked waiting process keeps its place in line: one small write that renews its
 * reservation's lease (`RESERVATION_TTL_MS`) if it is still live, instead of a full attempt.
 * It changes no field a change stream passes on, so nobody wakes. Returns the place's
 * remaining lease, or `undefined` when the key keeps no live place of ours, or the key is
 * granted to it (nothing written).
 */
export async function keepReservation(
  collection: LockCollection,
  key: string,
  reservation: string,
): Promise<number | undefined> {
  const expiresAt = `waiting.${reservation}.expiresAt`;
  const reply = (await collection.findOneAndUpdate(
    // A grant to the place, pending or lapsed, is left to the attempt, which settles it.
    { _id: key, grantedTo: { $ne: reservation }, $expr: { $gt: [`$${expiresAt}`, NOW] } },
    [{ $set: { [expiresAt]: { $add: [NOW, RESERVATION_TTL_MS] } } }],
    {
      returnDocument: 'after',
      projection: { _id: 0, reservedMs: { $subtract: [`$${expiresAt}`, NOW] } },
    },
  )) as { reservedMs: BsonInteger } | null;
  return reply ? toRemainingMs(reply.reservedMs) : undefined;
}

/**
 * A waiting process leaves: its reservation goes, and the write counts in `frees`, since
 * attempts it held back may now win. A grant it had not confirmed yet goes on to the next
 * waiting process, or frees the lock.
 *
 * While the key is still owned under the grant handed out here (`exceptGrant`: the common
 * case, a queue that empties as its last caller takes a grant), only the reservation goes,
 * by a small command: nothing is granted or freed then, since we hold the key.
 */
export async function withdrawReservation(
  collection: LockCollection,
  key: string,
  reservation: string,
  idleRetentionMs: number,
  /** A grant to the reservation this process handed out already: it is held, not pending. */
  exceptGrant?: string,
): Promise<void> {
  if (exceptGrant !== undefined) {
    const place = `waiting.${reservation}`;
    const { matchedCount } = await collection.updateOne(
      { _id: key, owner: exceptGrant, [place]: { $exists: true } },
      { $unset: { [place]: '' } },
    );
    if (matchedCount === 1) return;
  }
  const grantedToUs = pendingGrantTo(reservation, exceptGrant);
  const others = {
    $filter: { input: LIVE_RESERVATIONS, cond: { $ne: ['$$this.k', reservation] } },
  };
  await collection.updateOne(
    {
      _id: key,
      $or: [{ [`waiting.${reservation}`]: { $exists: true } }, { grantedTo: reservation }],
    },
    [
      { $set: { _o: oldest(LIVE_RESERVATIONS) } },
      {
        $set: {
          _h: grantableHead(reservation),
          _g: grantedToUs,
          // Only the head of the line holds others back (see `attemptPipeline`).
          _w: { $eq: [{ $ifNull: ['$_o.k', null] }, reservation] },
        },
      },
      {
        $set: {
          ...grantFields(
            grantingExpr('$_g', '$_h'),
            '$_h',
            {
              owner: { $cond: ['$_g', null, '$owner'] },
              holder: '$holder',
              fence: '$fence',
              acquiredAt: '$acquiredAt',
              expiresAt: { $cond: ['$_g', NOW, '$expiresAt'] },
              scope: '$scope',
              gcAt: {
                $cond: [
                  { $and: ['$_g', { $eq: [{ $size: LIVE_HOLDERS }, 0] }] },
                  gcNotBeforeNextFence({ $add: [NOW, idleRetentionMs] }),
                  '$gcAt',
                ],
              },
              waiting: { $arrayToObject: others },
              grantedTo: { $cond: ['$_g', cleared('$grantedTo'), '$grantedTo'] },
              grantee: { $cond: ['$_g', cleared('$grantee'), '$grantee'] },
            },
            others,
          ),
          // Others may get in now: the head left while no exclusive lease blocks them (that
          // lease's own end wakes them), or its grant went on or was freed. Only then do
          // waiters elsewhere hear of it.
          frees: {
            $cond: [
              { $or: ['$_g', { $and: ['$_w', { $not: [EXCLUSIVE_LIVE] }] }] },
              { $add: [{ $ifNull: ['$frees', 0] }, 1] },
              '$frees',
            ],
          },
        },
      },
      { $unset: ['_h', '_g', '_w', '_o'] },
    ],
  );
}
