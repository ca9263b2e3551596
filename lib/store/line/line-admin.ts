import { randomBytes } from 'node:crypto';
import { Long, type Document } from 'mongodb';
import type { LockEvent, LockHolderState, LockState } from '../../interfaces/lock-state.interface';
import { keyRangeFilter, type ListLocksQuery } from '../list-locks';
import { timeOf, type LineCollection } from './line-commands';
import { FENCES_PER_ENTRY, type LineDocument } from './line-document';
import type { LineWatch } from './line-events';
import { lastClusterTime, reopeningStream } from './line-events';
import { LIVE, NOW } from './line-pipelines';
import type { LineChangeEvent, LineStateReply } from './line-state';
import {
  LINE_STATE_PROJECTION,
  decodeLineState,
  holdingCountExpression,
  lineEvents,
  lineHolders,
} from './line-state';

/**
 * Operator commands on the lock collection (`inspect`, `list`, `forceRelease`, `releaseScope`)
 * and the `events$` stream, decoded by each command's own `$$NOW`; never an owner token.
 */

/** `gcAt` for an emptied line: retention `$$i` from now, floored at the last fence in ms. */
const GC_WHEN_EMPTY = {
  $cond: [{ $eq: ['$line', []] }, { $max: [{ $add: [NOW, '$$i'] }, { $toDate: '$f' }] }, '$gcAt'],
};

/**
 * The `lead` of an operator's write (`! <token>`, new each write to be in `updatedFields`): every
 * process's waiters on the key look at their place again, as the write may have removed theirs.
 */
export function operatorLead(): string {
  return `! ${randomBytes(12).toString('base64url')}`;
}

/** The holders of `scope` that `releaseScope` removed from `key`'s line. */
export interface ScopeHoldersRemoved {
  key: string;
  holders: LockHolderState[];
}

/** The key's state by the server clock, or `null` if it has no document. */
export async function inspectLine(
  collection: LineCollection,
  key: string,
): Promise<LockState | null> {
  const projection = LINE_STATE_PROJECTION;
  const reply = await collection.findOne<LineStateReply>({ _id: key }, { projection });
  return reply && stateOf(collection, reply);
}

/** A page of keys in `_id` order, each as {@link inspectLine} reports it (see `list-locks.ts`). */
export async function listLines(
  collection: LineCollection,
  { prefix, after, limit }: ListLocksQuery,
): Promise<LockState[]> {
  const replies = await collection
    .find<LineStateReply>(keyRangeFilter({ prefix, after }), {
      projection: LINE_STATE_PROJECTION,
      sort: { _id: 1 },
      limit,
    })
    .toArray();
  return Promise.all(replies.map((reply) => stateOf(collection, reply)));
}

async function stateOf(collection: LineCollection, reply: LineStateReply): Promise<LockState> {
  return decodeLineState(reply, await timeOf(collection, reply._id, reply));
}

/** Removes the holders and every dead entry; the waiters stay in order, the first now leads. */
const FORCE_RELEASE_PIPELINE: Document[] = [
  { $set: { _l: LIVE } },
  {
    $set: {
      line: { $slice: ['$_l', holdingCountExpression('$_l'), { $max: [1, { $size: '$_l' }] }] },
    },
  },
  { $set: { gcAt: GC_WHEN_EMPTY, lead: '$$l' } },
  { $unset: ['_l'] },
];

/**
 * The fence numbers among `numbers` of the live holders, at `$$NOW` (`[]` when none holds):
 * the entries a fenced release removes.
 */
function listedHolders(numbers: Document): Document {
  // `$slice` takes no count of 0: one entry at least, none kept when nobody holds.
  const holding = { $cond: [{ $eq: ['$$n', 0] }, [], { $slice: ['$$l.f', { $max: [1, '$$n'] }] }] };
  const counted = { $let: { vars: { n: holdingCountExpression('$$l') }, in: holding } };
  return { $let: { vars: { l: LIVE }, in: { $setIntersection: [counted, numbers] } } };
}

/** Removes the holders {@link listedHolders} names and every dead entry; the rest stay in order. */
function fencedReleasePipeline(numbers: Document): Document[] {
  return [
    { $set: { _x: listedHolders(numbers) } },
    {
      $set: { line: { $filter: { input: LIVE, cond: { $not: [{ $in: ['$$this.f', '$_x'] }] } } } },
    },
    { $set: { gcAt: GC_WHEN_EMPTY, lead: '$$l' } },
    { $unset: ['_x'] },
  ];
}

/**
 * Frees `key` whoever holds it, in one write by the server clock; the entries behind hold with
 * no further write. Every process hears it (`lead`): waiters look again, holders check. The
 * fence is kept, so the next join's is larger. A key with no live entry is not written.
 * Resolves to the holders removed, in line order.
 *
 * With `fences` (entries' first fences, as `LockHolderState.fence`): only the holders among them
 * go, decided in the same write; a key none of them holds is not written, and resolves to `[]`.
 */
export async function forceReleaseLine(
  collection: LineCollection,
  key: string,
  idleRetentionMs: number,
  fences?: readonly bigint[],
): Promise<LockHolderState[]> {
  const vars = { i: idleRetentionMs };
  if (fences === undefined) {
    const filter = { _id: key, $expr: { $gt: [{ $max: '$line.e' }, NOW] } };
    return operatorWrite(collection, filter, FORCE_RELEASE_PIPELINE, vars);
  }
  // Inline, in the filter as in the update: the entries hold fence numbers (a fence / 16).
  const numbers = { $literal: fences.map((fence) => Long.fromBigInt(fence / FENCES_PER_ENTRY)) };
  const filter = { _id: key, $expr: { $ne: [listedHolders(numbers), []] } };
  const before = await operatorWrite(collection, filter, fencedReleasePipeline(numbers), vars);
  const listed = new Set(fences.map((fence) => fence / FENCES_PER_ENTRY));
  return before.filter((holder) => listed.has(holder.fence / FENCES_PER_ENTRY));
}

/** Runs an operator's `pipeline` on the document `filter` finds; the holders it had before. */
async function operatorWrite(
  collection: LineCollection,
  filter: Document & { _id: string },
  pipeline: Document[],
  vars: Document,
): Promise<LockHolderState[]> {
  const before = (await collection.findOneAndUpdate(filter, pipeline, {
    returnDocument: 'before',
    projection: LINE_STATE_PROJECTION,
    let: { ...vars, l: operatorLead() },
  })) as LineStateReply | null;
  return before ? lineHolders(before, await timeOf(collection, filter._id, before)) : [];
}

/** Removes the entries of scope `$$s` (holders and waiters) and every dead entry. */
const RELEASE_SCOPE_PIPELINE: Document[] = [
  {
    $set: {
      line: {
        $filter: {
          input: { $ifNull: ['$line', []] },
          cond: { $and: [{ $gt: ['$$this.e', NOW] }, { $ne: ['$$this.sc', '$$s'] }] },
        },
      },
    },
  },
  { $set: { gcAt: GC_WHEN_EMPTY, lead: '$$l' } },
];

/** The document has a live entry of `scope` (inline: a `find` takes no `let`). */
function liveEntryOf(scope: string): Document {
  const ofScope = { $eq: ['$$this.sc', { $literal: scope }] };
  return {
    'line.sc': scope,
    $expr: {
      $anyElementTrue: [
        {
          $map: {
            input: { $ifNull: ['$line', []] },
            in: { $and: [ofScope, { $gt: ['$$this.e', NOW] }] },
          },
        },
      ],
    },
  };
}

/**
 * Removes every entry of `scope`, holding or waiting, from every line; resolves to the keys whose
 * holders it removed, with them. One `findOneAndUpdate` per document (a scope has few keys),
 * each decided by the server clock and heard as with {@link forceReleaseLine}. A document whose
 * scope entries left or ended since the read is not written.
 */
export async function releaseScopeInLines(
  collection: LineCollection,
  scope: string,
  idleRetentionMs: number,
): Promise<ScopeHoldersRemoved[]> {
  const filter = liveEntryOf(scope);
  const keys = await collection.find(filter, { projection: { _id: 1 } }).toArray();
  const vars = { s: { $literal: scope }, i: idleRetentionMs };
  const removed = await Promise.all(
    keys.map(async ({ _id: key }): Promise<ScopeHoldersRemoved> => {
      const ofKey = { _id: key, ...filter };
      const holders = await operatorWrite(collection, ofKey, RELEASE_SCOPE_PIPELINE, vars);
      return { key, holders: holders.filter((holder) => holder.scope === scope) };
    }),
  );
  return removed.filter(({ holders }) => holders.length > 0);
}

/** The changes {@link lineEvents} can make an event of: renewals never leave the server. */
const EVENT_CHANGES = [
  {
    $match: {
      $or: [
        { operationType: { $in: ['insert', 'delete', 'replace'] } },
        ...['f', 'lead', 'line'].map((field) => ({
          operationType: 'update',
          [`updateDescription.updatedFields.${field}`]: { $exists: true },
        })),
        { operationType: 'update', 'updateDescription.removedFields': 'line' },
        {
          operationType: 'update',
          'updateDescription.truncatedArrays': { $elemMatch: { field: 'line', newSize: 0 } },
        },
      ],
    },
  },
];

/** Every acquisition, release and deletion, for `events$` (see {@link reopeningStream}). */
export function watchLineEvents(
  collection: LineCollection,
  onEvent: (event: LockEvent) => void,
  onFailure: (error: unknown) => void = () => undefined,
  onOpen?: () => void,
  answerWithinMs?: number,
): LineWatch {
  return reopeningStream<LineChangeEvent>(
    (resuming) =>
      collection.watch<LineDocument, LineChangeEvent>(EVENT_CHANGES, {
        fullDocument: 'updateLookup',
        ...resuming,
      }),
    (change) => {
      for (const event of lineEvents(change)) onEvent(event);
    },
    onFailure,
    onOpen,
    // Start from now, when events$ (or waitForRelease) listens, not when the aggregate runs.
    { startAt: lastClusterTime(collection), answerWithinMs },
  );
}
