import type { Document } from 'mongodb';
import type { LineKind } from './line-document';

/**
 * The update pipelines of engine v2 (see `line-document.ts`), one per kind of request, built
 * once: a call's values travel in the command's `let` (`$$t`, `$$h`, `$$d`, ...), never
 * in the pipeline, so a mutex's command carries only the mutex's program. A pipeline that
 * decides to write nothing sets every field to itself: the server sees a no-op, writes nothing
 * to the oplog and wakes nobody.
 */

/** At most this many live entries per key (holders and waiters): bounds the document. */
export const LINE_CAPACITY = 1_000;

const NOW = '$$NOW';
/** The live entries, dropping those whose lease has ended. */
const LIVE = { $filter: { input: { $ifNull: ['$line', []] }, cond: { $gt: ['$$this.e', NOW] } } };
const NOBODY_LIVE = { $eq: ['$_l', []] };
const NEXT_FENCE = { $max: [{ $add: ['$f', 1] }, { $toLong: NOW }] };
/**
 * Not before the last fence in ms: fences may run ahead of the clock on a busy key, and the
 * TTL index removes a document only once `gcAt` has passed, so the next fence, from the clock,
 * is larger.
 */
const AFTER_LAST_FENCE = { $toDate: '$f' };
/**
 * `gcAt` after a write that set an entry's lease (`$$g`: lease plus idle retention): it only
 * moves later, so it stays after every live entry's end plus the retention.
 */
const GC_AFTER_LEASE = { $max: ['$gcAt', { $add: [NOW, '$$g'] }, AFTER_LAST_FENCE] };

export interface JoinShape {
  kind: LineKind['mode'];
  /** Join only if the entry would hold at once (`tryAcquire`); else join to wait. */
  onlyIfHolds: boolean;
  scoped: boolean;
}

/** The key is used as this kind of lock, or is free to become one. */
function kindFits(kind: JoinShape['kind']) {
  // `permits` is at least 1 where set.
  const sameKind = kind === 'permits' ? { $eq: ['$permits', '$$n'] } : { $not: ['$permits'] };
  return { $or: [sameKind, NOBODY_LIVE] };
}

/** The new entry, last in line, would hold: the line ahead of it is compatible. */
function wouldHold(kind: JoinShape['kind']) {
  if (kind === 'exclusive') return NOBODY_LIVE;
  if (kind === 'shared') {
    return { $allElementsTrue: [{ $map: { input: '$_l', in: { $eq: ['$$this.m', 's'] } } }] };
  }
  const used = { $sum: { $map: { input: '$_l', in: { $ifNull: ['$$this.w', 1] } } } };
  return { $lte: [{ $add: [used, '$$w'] }, '$$n'] };
}

function newEntry({ kind, scoped }: JoinShape) {
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
    // `f`: the last fence handed out, never below the server clock in ms (so that it survives
    // the idle document's removal).
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
 * The join pipeline for `shape`. `let`: t (token), h (holder id), d (lease ms), g (lease plus
 * idle retention, ms); n and w (permits, weight) for a semaphore; s (scope) when scoped.
 */
export function joinPipeline(shape: JoinShape): Document[] {
  const id = `${shape.kind}:${shape.onlyIfHolds}:${shape.scoped}`;
  let pipeline = joins.get(id);
  if (!pipeline) joins.set(id, (pipeline = buildJoin(shape)));
  return pipeline;
}

/**
 * A mutex's join to wait, in two stages: the filter admits only the usual case (a lock key,
 * not full, no entry of ours: not a retry), so the pipeline just appends. Anything else fails
 * the filter, and the upsert then fails with a duplicate key: the caller sends the full
 * {@link joinPipeline}, which decides every case.
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

const exclusiveJoins = new Map<boolean, Document[]>();

export function exclusiveJoinPipeline(scoped: boolean): Document[] {
  let pipeline = exclusiveJoins.get(scoped);
  if (!pipeline) {
    const entry = newEntry({ kind: 'exclusive', onlyIfHolds: false, scoped });
    pipeline = [
      { $set: { f: NEXT_FENCE } },
      { $set: { line: { $concatArrays: [LIVE, [entry]] }, gcAt: GC_AFTER_LEASE } },
    ];
    exclusiveJoins.set(scoped, pipeline);
  }
  return pipeline;
}

const exclusiveTryJoins = new Map<boolean, Document[]>();

/**
 * A mutex's `tryAcquire`: joins a lock key nobody holds, else writes nothing. A key that
 * nobody holds but that was last a semaphore is left to the full {@link joinPipeline}.
 */
export function exclusiveTryJoinPipeline(scoped: boolean): Document[] {
  let pipeline = exclusiveTryJoins.get(scoped);
  if (!pipeline) {
    // One stage: the document as it was, or with the fence `$$n`, our entry and `gcAt`.
    const entry = { ...newEntry({ kind: 'exclusive', onlyIfHolds: true, scoped }), f: '$$n' };
    const joins = {
      $and: [{ $not: ['$permits'] }, { $not: [{ $gt: [{ $max: '$line.e' }, NOW] }] }],
    };
    const gcAt = { $max: ['$gcAt', { $add: [NOW, '$$g'] }, { $toDate: '$$n' }] };
    const joined = { $let: { vars: { n: NEXT_FENCE }, in: { f: '$$n', line: [entry], gcAt } } };
    pipeline = [
      { $replaceWith: { $cond: [joins, { $mergeObjects: ['$$ROOT', joined] }, '$$ROOT'] } },
    ];
    exclusiveTryJoins.set(scoped, pipeline);
  }
  return pipeline;
}

/**
 * Who a leave may have made holder, for the change streams' filters (see `line-events.ts`):
 * `<holder id> <token>` of the entry now first when it is exclusive (it alone holds, so this
 * changes exactly when the holder does); `* <the leaver's token>` when it is shared or the key
 * is a semaphore, where a leave anywhere may let several hold: every process looks.
 */
const LEAD = {
  $let: {
    vars: { x: { $first: '$line' } },
    in: {
      $cond: [
        // `m` is set only on shared entries; `permits` only on semaphores.
        { $or: ['$$x.m', '$permits'] },
        { $concat: ['* ', '$$t'] },
        { $concat: ['$$x.h', ' ', '$$x.t'] },
      ],
    },
  },
};

/**
 * Leaving the line (release, or a waiter giving up): the entry `$$t` goes with every dead
 * one. Whoever now leads holds, with no further write. `gcAt` stays: set by the last join or
 * renewal past its lease plus the idle retention, it keeps an emptied line's document (and its
 * fence) at least the retention after this leave.
 */
export const LEAVE_PIPELINE: Document[] = [
  {
    $set: {
      line: {
        $filter: {
          input: '$line',
          cond: { $and: [{ $gt: ['$$this.e', NOW] }, { $ne: ['$$this.t', '$$t'] }] },
        },
      },
    },
  },
  { $set: { lead: LEAD } },
];

function renewPipeline(end: unknown): Document[] {
  const renewed = { $mergeObjects: ['$$this', { e: end }] };
  const line = {
    $map: { input: LIVE, in: { $cond: [{ $eq: ['$$this.t', '$$t'] }, renewed, '$$this'] } },
  };
  return [{ $set: { line, gcAt: GC_AFTER_LEASE } }];
}

/**
 * Renewing the entry `$$t`: its lease ends `$$d` ms from now, or later if it already did. A
 * renewal never moves a lease's end earlier: one that reaches the server late (its caller gave
 * up on it, a later one landed first) must not cut short the lease the later one promised.
 * Dead entries go first, ours too if its lease has ended: a dead entry is never brought back,
 * since others may already hold past it.
 */
export const RENEW_PIPELINE = renewPipeline({ $max: ['$$this.e', { $add: [NOW, '$$d'] }] });

/** {@link RENEW_PIPELINE}, but the lease ends exactly `$$d` ms from now (`expireIn`). */
export const EXPIRE_PIPELINE = renewPipeline({ $add: [NOW, '$$d'] });

/** Every reply returns the line with the server time it was read at, to decode it by. */
export const LINE_REPLY = { line: 1, permits: 1, now: NOW };

/** The reply of a mutex's join to wait, which lands only on a lock key. */
export const LOCK_LINE_REPLY = { line: 1, now: NOW };
