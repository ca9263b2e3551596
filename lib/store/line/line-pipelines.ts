import type { Document } from 'mongodb';
import type { LineKind } from './line-document';

/**
 * Engine v2's update pipelines (see `line-document.ts`), built once per request shape: call
 * values travel in `let` (`$$t`, `$$h`, ...), so a mutex's command carries only its program.
 * A pipeline that decides not to write sets every field to itself: a no-op that wakes nobody.
 */

/** At most this many live entries per key (holders and waiters): bounds the document. */
export const LINE_CAPACITY = 1_000;

export const NOW = '$$NOW';
/** The start of a `lead` that changes no holder but makes every process's waiters look. */
export const LOOK_AGAIN_LEAD = '? ';

export function isLookAgainLead(lead: unknown): boolean {
  return typeof lead === 'string' && lead.startsWith(LOOK_AGAIN_LEAD);
}
/** The entries whose lease has not ended. */
export const LIVE = {
  $filter: { input: { $ifNull: ['$line', []] }, cond: { $gt: ['$$this.e', NOW] } },
};
const NOBODY_LIVE = { $eq: ['$_l', []] };
const NEXT_FENCE = { $max: [{ $add: ['$f', 1] }, { $toLong: NOW }] };
/** A `gcAt` floor: fences may outrun the clock; the next, taken from it, must exceed them. */
const AFTER_LAST_FENCE = { $toDate: '$f' };
/** `gcAt` past every lease plus the idle retention (`$$g`): it only moves later. */
const GC_AFTER_LEASE = { $max: ['$gcAt', { $add: [NOW, '$$g'] }, AFTER_LAST_FENCE] };

interface JoinShape {
  kind: LineKind['mode'];
  onlyIfHolds: boolean;
  scoped: boolean;
}

/** The key is this kind of lock, or free to become one. */
function kindFits(kind: JoinShape['kind']) {
  // `permits` is at least 1 where set.
  const sameKind = kind === 'permits' ? { $eq: ['$permits', '$$n'] } : { $not: ['$permits'] };
  return { $or: [sameKind, NOBODY_LIVE] };
}

/** The new entry, last in line, would hold. */
function wouldHold(kind: JoinShape['kind']) {
  if (kind === 'exclusive') return NOBODY_LIVE;
  if (kind === 'shared') {
    return { $allElementsTrue: [{ $map: { input: '$_l', in: { $eq: ['$$this.m', 's'] } } }] };
  }
  const used = { $sum: { $map: { input: '$_l', in: { $ifNull: ['$$this.w', 1] } } } };
  return { $lte: [{ $add: [used, '$$w'] }, '$$n'] };
}

function newEntry({ kind, scoped }: Omit<JoinShape, 'onlyIfHolds'>) {
  return {
    t: '$$t',
    f: '$f',
    e: { $add: [NOW, '$$d'] },
    h: '$$h',
    ...(kind === 'shared' ? { m: 's' } : {}),
    ...(kind === 'permits' ? { w: '$$w' } : {}),
    ...(scoped ? { sc: '$$s' } : {}),
  };
}

function buildJoin(shape: JoinShape): Document[] {
  const joins = {
    $and: [
      kindFits(shape.kind),
      // A retry of a join that landed finds its own entry and writes nothing.
      { $not: [{ $in: ['$$t', '$_l.t'] }] },
      { $lt: [{ $size: '$_l' }, LINE_CAPACITY] },
      ...(shape.onlyIfHolds ? [wouldHold(shape.kind)] : []),
    ],
  };
  const ifJoins = (value: unknown, field: string) => ({ $cond: ['$_j', value, field] });
  return [
    { $set: { _l: LIVE } },
    { $set: { _j: joins } },
    // Never below the server clock in ms, so fences survive the idle document's removal.
    { $set: { f: ifJoins(NEXT_FENCE, '$f') } },
    {
      $set: {
        line: ifJoins({ $concatArrays: ['$_l', [newEntry(shape)]] }, '$line'),
        permits: ifJoins(shape.kind === 'permits' ? '$$n' : '$$REMOVE', '$permits'),
        gcAt: ifJoins(GC_AFTER_LEASE, '$gcAt'),
      },
    },
    { $unset: ['_l', '_j'] },
  ];
}

const joins = new Map<string, Document[]>();

/**
 * `let`: t (token), h (holder id), d (lease ms), g (lease plus idle retention, ms); n and w
 * (permits, weight) for a semaphore; s (scope) when scoped.
 */
export function joinPipeline(shape: JoinShape): Document[] {
  const id = `${shape.kind}:${shape.onlyIfHolds}:${shape.scoped}`;
  return joins.get(id) ?? joins.set(id, buildJoin(shape)).get(id)!;
}

/**
 * A mutex's join to wait: the filter admits only the usual case (a lock key, not full, not a
 * retry), so the pipeline just appends. Otherwise the upsert fails with a duplicate key and the
 * caller sends the full {@link joinPipeline}.
 */
export function exclusiveJoinFilter(key: string, token: string) {
  // `$exists`, not an equality to null: an upsert would copy an equality into the new document.
  return {
    _id: key,
    'line.t': { $ne: token },
    permits: { $exists: false },
    [`line.${LINE_CAPACITY - 1}`]: { $exists: false },
  };
}

/** A mutex's join to wait, unscoped and scoped. */
const EXCLUSIVE_JOINS = [false, true].map((scoped): Document[] => [
  { $set: { f: NEXT_FENCE } },
  {
    $set: {
      line: { $concatArrays: [LIVE, [newEntry({ kind: 'exclusive', scoped })]] },
      gcAt: GC_AFTER_LEASE,
    },
  },
]);

export const exclusiveJoinPipeline = (scoped: boolean) => EXCLUSIVE_JOINS[Number(scoped)];

/**
 * A mutex's `tryAcquire`: joins a lock key nobody holds, else writes nothing. A free key last
 * used as a semaphore is left to the full {@link joinPipeline}.
 */
const EXCLUSIVE_TRY_JOINS = [false, true].map((scoped): Document[] => {
  const entry = { ...newEntry({ kind: 'exclusive', scoped }), f: '$$n' };
  const joins = { $and: [{ $not: ['$permits'] }, { $not: [{ $gt: [{ $max: '$line.e' }, NOW] }] }] };
  const gcAt = { $max: ['$gcAt', { $add: [NOW, '$$g'] }, { $toDate: '$$n' }] };
  const joined = { $let: { vars: { n: NEXT_FENCE }, in: { f: '$$n', line: [entry], gcAt } } };
  return [{ $replaceWith: { $cond: [joins, { $mergeObjects: ['$$ROOT', joined] }, '$$ROOT'] } }];
});

export const exclusiveTryJoinPipeline = (scoped: boolean) => EXCLUSIVE_TRY_JOINS[Number(scoped)];

/**
 * Who a leave may have made holder, for the streams' filters (`line-events.ts`): for an
 * exclusive first entry `<holder id> <token>` (changes exactly when the holder does); for a
 * shared or semaphore one `* <leaver's token>`, as several may now hold: all look. Nobody left:
 * null, so a later write MongoDB streams whole (`replace`) names nobody.
 */
const LEAD = {
  $let: {
    vars: { x: { $first: '$line' } },
    in: {
      $cond: [
        // `m` is set only on shared entries; `permits` only on semaphores.
        { $or: ['$$x.m', { $and: ['$$x.t', '$permits'] }] },
        { $concat: ['* ', '$$t'] },
        { $concat: ['$$x.h', ' ', '$$x.t'] },
      ],
    },
  },
};

/**
 * Drops the entries `$$ts` (ours, leaving together) and every dead one; `$$t` names the leave in
 * `lead` (a lone leave's token, a new name for several). The new leader holds with no further
 * write. `gcAt` stays: already past every lease plus the retention, it keeps an emptied
 * document's fence.
 */
export const LEAVE_PIPELINE: Document[] = [
  {
    $set: {
      line: {
        $filter: {
          input: '$line',
          cond: { $and: [{ $gt: ['$$this.e', NOW] }, { $not: [{ $in: ['$$this.t', '$$ts'] }] }] },
        },
      },
    },
  },
  { $set: { lead: LEAD } },
];

function renewPipeline(end: unknown, more: Document = {}): Document[] {
  const renewed = { $mergeObjects: ['$$this', { e: end }] };
  const line = {
    $map: { input: LIVE, in: { $cond: [{ $eq: ['$$this.t', '$$t'] }, renewed, '$$this'] } },
  };
  return [{ $set: { line, gcAt: GC_AFTER_LEASE, ...more } }];
}

/**
 * Entry `$$t`'s lease ends `$$d` ms from now, or later if it already did: a late renewal must
 * not cut short the lease a newer one promised. Dead entries go first, ours too (never revived:
 * others may already hold past it).
 */
export const RENEW_PIPELINE = renewPipeline({ $max: ['$$this.e', { $add: [NOW, '$$d'] }] });

/**
 * {@link RENEW_PIPELINE}, but the lease ends exactly `$$d` ms from now (`expireIn`). A lease
 * cut short ends before the time its waiters read: `lead` `? <token>` makes every process's
 * waiters of the key read it again (see `line-events.ts`).
 */
export const EXPIRE_PIPELINE = renewPipeline(
  { $add: [NOW, '$$d'] },
  { lead: { $concat: [LOOK_AGAIN_LEAD, '$$t'] } },
);

/** The line, and the server time to decode it by. */
export const LINE_REPLY = { line: 1, permits: 1, now: NOW };

/** The reply of a mutex's join to wait, which lands only on a lock key. */
export const LOCK_LINE_REPLY = { line: 1, now: NOW };
