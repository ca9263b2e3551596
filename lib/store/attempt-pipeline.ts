import { LONG_ONE, LONG_ZERO } from './bson-values';
import {
  EXCLUSIVE_LIVE,
  LIVE_HOLDERS,
  LIVE_RESERVATIONS,
  MAX_HOLDERS_PER_KEY,
  RECENT_RELEASES,
  RESERVATION_TTL_MS,
  entrySlot,
  isEntryMode,
  isNullExpr,
  oldest,
} from './lock-modes';
import type { LockModeRequest } from './lock-modes';

export interface AttemptPipelineRequest {
  owner: string;
  holder: string;
  ttlMs: number;
  mode: LockModeRequest;
  scope: string | undefined;
  /** The waiting process's reservation id, when the attempt is made while waiting. */
  reservation: string | undefined;
}

const NOW = '$$NOW';

/**
 * The key is in use in another form than asked: a semaphore with other permits, or a lock
 * (exclusive or shared) where a semaphore is asked, or the other way round. Reads `excl` (the
 * exclusive lease is live) and `liveCount` (live holder entries) from the given expressions,
 * so the pipeline and the reply decide it alike.
 */
export function conflictExpr(mode: LockModeRequest, excl: unknown, liveCount: unknown) {
  const permits = { $ifNull: ['$permits', null] };
  if (mode.permits === undefined) {
    return { $and: [{ $gt: [liveCount, 0] }, { $ne: [permits, null] }] };
  }
  return { $or: [excl, { $and: [{ $gt: [liveCount, 0] }, { $ne: [permits, mode.permits] }] }] };
}

/** How many permits a reservation holds back: an exclusive waiter holds back all of them. */
function reservationWeight(mode: LockModeRequest): number {
  return mode.mode === 'exclusive' ? MAX_HOLDERS_PER_KEY : mode.weight;
}

/**
 * The attempt's update pipeline. Stage by stage: read the key's state (`_m`: exclusive lease,
 * live holder entries, live reservations and the oldest of them, the head); decide; write
 * only on a grant, or when a waiting attempt must record or refresh its reservation; drop
 * `_m`. When nothing is to be written every field is set to itself: the server sees a no-op,
 * writes nothing to the oplog, and no change event wakes anyone.
 *
 * Fairness: an attempt that is not the head's leaves room for the head's reservation, so a
 * waiting exclusive holder is not overtaken by a stream of shared ones, nor a wide permit
 * request by narrow ones.
 */
export function attemptPipeline(request: AttemptPipelineRequest) {
  const { owner, holder, ttlMs, mode, scope, reservation } = request;
  const entry = isEntryMode(mode);
  const slot = entrySlot(owner);
  const capacity = mode.permits ?? MAX_HOLDERS_PER_KEY;
  const alreadyOurs = entry
    ? { $in: [slot, '$_m.live.k'] }
    : { $and: ['$_m.excl', { $eq: ['$owner', owner] }] };
  const headBlocks = {
    $and: [{ $ne: ['$_m.head', null] }, { $ne: ['$_m.head.k', reservation ?? null] }],
  };
  const conflict = conflictExpr(mode, '$_m.excl', '$_m.count');
  const grant = entry
    ? {
        $and: [
          { $not: ['$_m.excl'] },
          { $not: [alreadyOurs] },
          { $not: [conflict] },
          { $lt: ['$_m.count', MAX_HOLDERS_PER_KEY] },
          {
            $lte: [
              { $add: ['$_m.used', mode.weight, { $cond: [headBlocks, '$_m.head.v.weight', 0] }] },
              capacity,
            ],
          },
        ],
      }
    : {
        $and: [
          { $not: ['$_m.excl'] },
          { $eq: ['$_m.count', 0] },
          { $not: [headBlocks] },
          { $not: [conflict] },
        ],
      };
  const myReservation = {
    $arrayElemAt: [
      { $filter: { input: '$_m.queue', cond: { $eq: ['$$this.k', reservation] } } },
      0,
    ],
  };
  const weight = reservationWeight(mode);
  // Only where fairness is at stake: a plain mutex with no shared holders and nobody
  // reserving writes nothing when it loses, as it always has.
  const reserve =
    reservation === undefined
      ? false
      : {
          $and: [
            { $not: ['$_m.grant'] },
            { $not: [conflict] },
            // A retry of an attempt that won already holds: it must not queue behind itself.
            { $not: [alreadyOurs] },
            // Refused at the holder cap: the attempt fails, and must leave nothing behind.
            entry
              ? { $lt: ['$_m.count', MAX_HOLDERS_PER_KEY] }
              : { $or: [{ $gt: ['$_m.count', 0] }, { $gt: [{ $size: '$_m.queue' }, 0] }] },
            {
              $or: [
                { $eq: [{ $ifNull: ['$_m.mine', null] }, null] },
                { $lt: ['$_m.mine.v.expiresAt', { $add: [NOW, RESERVATION_TTL_MS / 2] }] },
                { $ne: ['$_m.mine.v.weight', weight] },
              ],
            },
          ],
        };
  const othersQueued = {
    $filter: { input: '$_m.queue', cond: { $ne: ['$$this.k', reservation ?? null] } },
  };
  const newFence = {
    $max: [{ $add: [{ $ifNull: ['$fence', LONG_ZERO] }, LONG_ONE] }, { $toLong: NOW }],
  };
  // A grant drops our reservation and the expired ones; a reservation write refreshes ours.
  const afterGrant = {
    $cond: [
      { $and: ['$_m.grant', { $not: [isNullExpr('$waiting')] }] },
      { $arrayToObject: othersQueued },
      '$waiting',
    ],
  };
  const reserved = {
    $arrayToObject: {
      $concatArrays: [
        othersQueued,
        [
          {
            k: reservation,
            v: {
              weight,
              since: { $ifNull: ['$_m.mine.v.since', NOW] },
              expiresAt: { $add: [NOW, RESERVATION_TTL_MS] },
            },
          },
        ],
      ],
    },
  };
  // What our place in line holds back after this attempt: what we hold, or what we wait for.
  const taken = {
    $cond: [
      '$_m.grant',
      entry ? mode.weight : MAX_HOLDERS_PER_KEY,
      reservation === undefined
        ? MAX_HOLDERS_PER_KEY
        : { $cond: ['$_m.reserve', weight, MAX_HOLDERS_PER_KEY] },
    ],
  };
  const ifGranted = (value: unknown, field: string) => ({ $cond: ['$_m.grant', value, field] });
  const exclusiveFields = entry
    ? {}
    : {
        // Released and expired holder entries go with an exclusive grant.
        holders: {
          $cond: [
            { $and: ['$_m.grant', { $not: [isNullExpr('$holders')] }] },
            { $arrayToObject: '$_m.recent' },
            '$holders',
          ],
        },
        owner: ifGranted(owner, '$owner'),
        holder: ifGranted(holder, '$holder'),
        acquiredAt: ifGranted(NOW, '$acquiredAt'),
        expiresAt: ifGranted({ $add: [NOW, ttlMs] }, '$expiresAt'),
        scope: ifGranted({ $literal: scope ?? null }, '$scope'),
      };
  const entryFields = entry
    ? {
        holders: ifGranted(
          {
            $arrayToObject: {
              $concatArrays: [
                '$_m.recent',
                '$_m.live',
                [
                  {
                    k: slot,
                    v: {
                      owner,
                      holder,
                      fence: newFence,
                      weight: mode.weight,
                      acquiredAt: NOW,
                      expiresAt: { $add: [NOW, ttlMs] },
                      scope: { $literal: scope ?? null },
                    },
                  },
                ],
              ],
            },
          },
          '$holders',
        ),
        permits: ifGranted({ $literal: mode.permits ?? null }, '$permits'),
      }
    : {};
  return [
    {
      $set: {
        _m: {
          excl: EXCLUSIVE_LIVE,
          live: LIVE_HOLDERS,
          recent: RECENT_RELEASES,
          queue: LIVE_RESERVATIONS,
        },
      },
    },
    {
      $set: {
        '_m.head': oldest('$_m.queue'),
        '_m.used': { $sum: '$_m.live.v.weight' },
        '_m.count': { $size: '$_m.live' },
        '_m.mine': myReservation,
      },
    },
    { $set: { '_m.grant': grant } },
    { $set: { '_m.reserve': reserve } },
    {
      $set: {
        ...exclusiveFields,
        ...entryFields,
        // Never below the server's clock in ms, so a key whose idle document was
        // garbage-collected still gets a larger fence than any it had before.
        fence: ifGranted(newFence, '$fence'),
        // Our reservation held back more than we now take (granted, or rewritten for a
        // narrower local waiter): the others hear of the room as of a release.
        frees: {
          $cond: [
            {
              $and: [
                { $ne: [{ $ifNull: ['$_m.mine', null] }, null] },
                { $gt: ['$_m.mine.v.weight', taken] },
              ],
            },
            { $add: [{ $ifNull: ['$frees', 0] }, 1] },
            '$frees',
          ],
        },
        gcAt: ifGranted(null, '$gcAt'),
        waiting:
          reservation === undefined ? afterGrant : { $cond: ['$_m.reserve', reserved, afterGrant] },
      },
    },
    { $unset: '_m' },
  ];
}
