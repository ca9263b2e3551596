import { randomBytes } from 'node:crypto';
import type { Document } from 'mongodb';
import type { LockEvent, LockHolderState, LockState } from '../../interfaces/lock-state.interface';
import { keyRangeFilter, type ListLocksQuery } from '../list-locks';
import { timeOf, type LineCollection } from './line-commands';
import type { LineDocument } from './line-document';
import type { LineWatch } from './line-events';
import { lastClusterTime, reopeningStream, resumingAfter, startingAt } from './line-events';
import type { LineChangeEvent, LineStateReply } from './line-state';
import {
  LINE_STATE_PROJECTION,
  decodeLineState,
  holdingCountExpression,
  lineEvents,
  lineHolders,
} from './line-state';

/**
 * Engine v2's operator commands on the lock collection (`inspect`, `list`, `forceRelease`,
 * `releaseScope`) and its `events$` stream, with the current engine's results. Decoded by the
 * server clock of each command's own `$$NOW`; never an owner token.
 */

const NOW = '$$NOW';
const LIVE = { $filter: { input: { $ifNull: ['$line', []] }, cond: { $gt: ['$$this.e', NOW] } } };

/**
 * `gcAt` when an operator empties the line: the idle retention (`$$i`) from now, and never
 * before the last fence in ms (the next fence, from the clock, is then larger). (A leave keeps
 * the `gcAt` its joins and renewals set, which is later still.)
 */
const GC_WHEN_EMPTY = {
  $cond: [{ $eq: ['$line', []] }, { $max: [{ $add: [NOW, '$$i'] }, { $toDate: '$f' }] }, '$gcAt'],
};

/**
 * A `lead` that every process's waiters hear (`line-events.ts` matches `* <token>`), new on
 * every write so that it is in the change's `updatedFields`.
 */
function wakeEveryone(): string {
  return `* ${randomBytes(12).toString('base64url')}`;
}

/** The key's state by the server clock, or `null` if it has no document. */
export async function inspectLine(
  collection: LineCollection,
  key: string,
): Promise<LockState | null> {
  const reply = (await collection.findOne(
    { _id: key },
    { projection: LINE_STATE_PROJECTION },
  )) as LineStateReply | null;
  return reply && decodeLineState(reply, await timeOf(collection, key, reply));
}

/**
 * A page of keys in `_id` order, each as {@link inspectLine} reports it: the current engine's
 * `listLocks` (`prefix` an anchored regular expression on `_id`, `after` exclusive, `limit`).
 */
export async function listLines(
  collection: LineCollection,
  { prefix, after, limit }: ListLocksQuery,
): Promise<LockState[]> {
  const replies = (await collection
    .find(keyRangeFilter({ prefix, after }), {
      projection: LINE_STATE_PROJECTION,
      sort: { _id: 1 },
      limit,
    })
    .toArray()) as unknown as LineStateReply[];
  const states: LockState[] = [];
  for (const reply of replies) {
    states.push(decodeLineState(reply, await timeOf(collection, reply._id, reply)));
  }
  return states;
}

/**
 * Removes the holders (the holding prefix of the live entries, computed by the server) and
 * every dead entry; the waiters stay, in order, and the first of them now leads.
 */
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
 * Frees `key` whoever holds it, in one write decided by the server clock: the holders go, and
 * the entries behind them hold with no further write. Every process's waiters hear it (the
 * `lead`); holders elsewhere learn it at their next renewal (their entry is gone). The fence
 * is untouched, so the next join's is larger. A key with no live entry is not written.
 * Resolves to the holders removed, in line order. `idleRetentionMs`: for `gcAt` when the line
 * is left empty.
 */
export async function forceReleaseLine(
  collection: LineCollection,
  key: string,
  idleRetentionMs: number,
): Promise<LockHolderState[]> {
  const before = (await collection.findOneAndUpdate(
    { _id: key, $expr: { $gt: [{ $max: '$line.e' }, NOW] } },
    FORCE_RELEASE_PIPELINE,
    {
      returnDocument: 'before',
      projection: LINE_STATE_PROJECTION,
      let: { i: idleRetentionMs, l: wakeEveryone() },
    },
  )) as LineStateReply | null;
  if (!before) return [];
  return lineHolders(before, await timeOf(collection, key, before));
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

/** The document has a live entry of `scope` (the scope inline: a `find` takes no `let`). */
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
 * Removes every entry of `scope`, holding or waiting, from every line, and resolves to how
 * many of them held at their write. One `findOneAndUpdate` per document found: the keys of
 * one scope are few (a session's or a job's), and each write is decided by the server clock
 * on its own document. Every process's waiters hear each write (the `lead`); holders
 * elsewhere learn it at their next renewal. A document whose scope's entries left or ran out
 * between the read and its write is not written.
 */
export async function releaseScopeInLines(
  collection: LineCollection,
  scope: string,
  idleRetentionMs: number,
): Promise<number> {
  const filter = liveEntryOf(scope);
  const keys = await collection.find(filter, { projection: { _id: 1 } }).toArray();
  const freed = await Promise.all(
    keys.map(async ({ _id: key }) => {
      const before = (await collection.findOneAndUpdate(
        { _id: key, ...filter },
        RELEASE_SCOPE_PIPELINE,
        {
          returnDocument: 'before',
          projection: LINE_STATE_PROJECTION,
          let: { s: { $literal: scope }, i: idleRetentionMs, l: wakeEveryone() },
        },
      )) as LineStateReply | null;
      if (!before) return 0;
      const holders = lineHolders(before, await timeOf(collection, key, before));
      return holders.filter((holder) => holder.scope === scope).length;
    }),
  );
  return freed.reduce((sum, count) => sum + count, 0);
}

/**
 * The changes {@link lineEvents} can make an event of: renewals (only `line.N.e` and `gcAt`)
 * never leave the server.
 */
const EVENT_CHANGES = [
  {
    $match: {
      $or: [
        { operationType: { $in: ['insert', 'delete'] } },
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

/**
 * Watches the lock collection for `events$`: every acquisition, release and deletion, as
 * {@link lineEvents} reads them. Like `watchLines`, a failed stream is reopened after a pause
 * (events meanwhile are missed) and `onFailure` hears why.
 */
export function watchLineEvents(
  collection: LineCollection,
  onEvent: (event: LockEvent) => void,
  onFailure: (error: unknown) => void = () => undefined,
  onOpen?: () => void,
): LineWatch {
  return reopeningStream<LineChangeEvent>(
    (resumeAfter, startAt) =>
      collection.watch<LineDocument, LineChangeEvent>(EVENT_CHANGES, {
        fullDocument: 'updateLookup',
        maxAwaitTimeMS: 1_000,
        ...resumingAfter(resumeAfter),
        ...startingAt(startAt),
      }),
    (change) => {
      for (const event of lineEvents(change)) onEvent(event);
    },
    onFailure,
    onOpen,
    // Taken now, when events$ (or a waitForRelease) starts listening, not when the aggregate runs.
    lastClusterTime(collection),
  );
}
