import {
  GRANT_LEASE_MS,
  LIVE_RESERVATIONS_BUT_LAPSED,
  NEXT_FENCE,
  cleared,
  grantOwnerExpr,
  pendingGrantTo,
  toBackOfLine,
} from './direct-grant';
import {
  EXCLUSIVE_LIVE,
  LIVE_HOLDERS,
  MAX_HOLDERS_PER_KEY,
  RECENT_RELEASES,
  RESERVATION_TTL_MS,
  entrySlot,
  isEntryMode,
  isNullExpr,
  oldest,
} from './lock-modes';
import type { LockModeRequest, ReservationUse } from './lock-modes';

export interface AttemptPipelineRequest {
  owner: string;
  holder: string;
  ttlMs: number;
  mode: LockModeRequest;
  scope: string | undefined;
  /** The waiting process's reservation id, when the attempt is made while waiting. */
  reservation: string | undefined;
  /** How the attempt uses the reservation (exclusive waiters: kept after a win, grantable). */
  reservationUse?: ReservationUse;
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
  // An exclusive waiter confirms a grant to its process (see `direct-grant.ts`) by taking it;
  // never one its process handed out already.
  const ourGrant =
    reservation === undefined
      ? { $literal: false }
      : pendingGrantTo(reservation, request.reservationUse?.exceptGrant);
  const grantedToUs = entry ? { $literal: false } : ourGrant;
  // A shared or permit waiter cannot take a grant to its process (one made while an exclusive
  // caller was its head): it drops it, and decides as on a free key.
  const dropsOurGrant = entry ? ourGrant : { $literal: false };
  const keep = !entry && request.reservationUse?.keep === true;
  const grantable = !entry && request.reservationUse?.grantable === true;
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
  // The key is free but the oldest reservation, another process's, waits for the exclusive
  // lock: the attempt hands it over rather than take it (an ended lease, an unconfirmed grant
  // that ran out).
  const handTo = {
    $cond: [
      {
        $and: [
          { $not: ['$_m.excl'] },
          { $eq: ['$_m.count', 0] },
          headBlocks,
          { $not: [isNullExpr('$_m.head.v.holder')] },
        ],
      },
      '$_m.head',
      null,
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
            { $not: ['$_m.granted'] },
            { $not: [conflict] },
            // A retry of an attempt that won already holds: it must not queue behind itself.
            { $not: [alreadyOurs] },
            // A waiter that can be granted the lock always takes its place in line; a polling
            // one only where fairness is at stake (shared holders, or someone already in
            // line), so that pollers of a plain mutex take it as they find it free. A shared
            // or semaphore waiter does so at the holder cap too: it waits there like anywhere.
            entry ||
              grantable || {
                $or: [{ $gt: ['$_m.count', 0] }, { $gt: [{ $size: '$_m.queue' }, 0] }],
              },
            {
              $or: [
                { $eq: [{ $ifNull: ['$_m.mine', null] }, null] },
                { $lt: ['$_m.mine.v.expiresAt', { $add: [NOW, RESERVATION_TTL_MS / 2] }] },
                { $ne: ['$_m.mine.v.weight', weight] },
                // The process started or stopped hearing grants.
                { $ne: [{ $ifNull: ['$_m.mine.v.holder', null] }, grantable ? holder : null] },
              ],
            },
          ],
        };
  // The others' reservations, the one we hand the lock to moved to the back of the line.
  const othersQueued = {
    $map: {
      input: { $filter: { input: '$_m.queue', cond: { $ne: ['$$this.k', reservation ?? null] } } },
      in: {
        $cond: [
          { $and: ['$_m.handing', { $eq: ['$$this.k', '$_m.handTo.k'] }] },
          { k: '$$this.k', v: { $mergeObjects: ['$$this.v', { since: NOW }] } },
          '$$this',
        ],
      },
    },
  };
  const ours = (since: unknown) => [
    {
      k: reservation,
      v: {
        weight,
        since,
        expiresAt: { $add: [NOW, RESERVATION_TTL_MS] },
        // Only an exclusive waiter that hears grants takes them: its reservation names its process.
        ...(grantable ? { holder } : {}),
      },
    },
  ];
  // A win drops our reservation (or, with more waiting here, puts it at the back) and the
  // expired ones; a reservation write refreshes ours; a hand-over moves the grantee back.
  // (A key without reservations gets none written, unless ours stays.)
  const afterWin = keep
    ? { $arrayToObject: { $concatArrays: ['$_m.others', ours(NOW)] } }
    : { $cond: [{ $not: [isNullExpr('$waiting')] }, { $arrayToObject: '$_m.others' }, '$waiting'] };
  const reserved = {
    $arrayToObject: {
      $concatArrays: ['$_m.others', ours({ $ifNull: ['$_m.mine.v.since', NOW] })],
    },
  };
  const afterHandOver = toBackOfLine('$_m.queue', '$_m.handTo');
  // What our place in line holds back after this attempt: what we hold, or what we wait for.
  const taken = {
    $cond: [
      '$_m.won',
      entry ? mode.weight : MAX_HOLDERS_PER_KEY,
      reservation === undefined
        ? MAX_HOLDERS_PER_KEY
        : { $cond: ['$_m.reserve', weight, MAX_HOLDERS_PER_KEY] },
    ],
  };
  const ifGranted = (value: unknown, field: string) => ({ $cond: ['$_m.grant', value, field] });
  // The exclusive lease: ours when we take it (or confirm a grant to us); the head's when we
  // find it free and hand it over; else as it was (or, when a shared or permit waiter drops a
  // grant to its process, `dropped`). Each attempt carries only its own mode's branches.
  const lease = (
    ourValue: unknown,
    handedValue: unknown,
    field: string,
    dropped: unknown = field,
  ) => {
    const notOurs = {
      $cond: [
        '$_m.handing',
        handedValue,
        entry ? { $cond: ['$_m.dropped', dropped, field] } : field,
      ],
    };
    return entry ? notOurs : { $cond: ['$_m.won', ourValue, notOurs] };
  };
  const exclusiveFields = {
    // Released and expired holder entries go with an exclusive grant.
    ...(entry
      ? {}
      : {
          holders: {
            $cond: [
              { $and: ['$_m.grant', { $not: [isNullExpr('$holders')] }] },
              { $arrayToObject: '$_m.recent' },
              '$holders',
            ],
          },
        }),
    owner: lease(owner, grantOwnerExpr('$_m.handTo.k'), '$owner', null),
    holder: lease(holder, '$_m.handTo.v.holder', '$holder'),
    acquiredAt: lease({ $cond: ['$_m.grant', NOW, '$acquiredAt'] }, NOW, '$acquiredAt'),
    expiresAt: lease({ $add: [NOW, ttlMs] }, { $add: [NOW, GRANT_LEASE_MS] }, '$expiresAt', NOW),
    scope: lease({ $literal: scope ?? null }, null, '$scope'),
    grantedTo: lease(cleared('$grantedTo'), '$_m.handTo.k', '$grantedTo', null),
    grantee: lease(cleared('$grantee'), '$_m.handTo.v.holder', '$grantee', null),
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
                      fence: NEXT_FENCE,
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
          excl: { $and: [EXCLUSIVE_LIVE, { $not: [dropsOurGrant] }] },
          live: LIVE_HOLDERS,
          recent: RECENT_RELEASES,
          queue: LIVE_RESERVATIONS_BUT_LAPSED,
          granted: grantedToUs,
          dropped: dropsOurGrant,
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
    { $set: { '_m.grant': grant, '_m.handTo': handTo } },
    {
      $set: {
        '_m.reserve': reserve,
        '_m.won': { $or: ['$_m.grant', '$_m.granted'] },
        '_m.handing': { $ne: ['$_m.handTo', null] },
      },
    },
    { $set: { '_m.others': othersQueued } },
    {
      $set: {
        ...exclusiveFields,
        ...entryFields,
        // Never below the server's clock in ms, so a key whose idle document was
        // garbage-collected still gets a larger fence than any it had before.
        fence: { $cond: [{ $or: ['$_m.grant', '$_m.handing'] }, NEXT_FENCE, '$fence'] },
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
        gcAt: { $cond: [{ $or: ['$_m.grant', '$_m.handing'] }, null, '$gcAt'] },
        waiting: {
          $cond: [
            '$_m.won',
            afterWin,
            {
              $cond: [
                '$_m.reserve',
                reserved,
                { $cond: ['$_m.handing', afterHandOver, '$waiting'] },
              ],
            },
          ],
        },
      },
    },
    { $unset: '_m' },
  ];
}
