import type { ChangeStreamDocument, Document } from 'mongodb';
import type { LockEvent, LockHolderState, LockState } from '../../interfaces/lock-state.interface';
import { toBigInt } from '../bson-values';
import type { LineDocument, LineEntry } from './line-document';
import { firstFence, holdingCount } from './line-document';

/**
 * Engine v2's lines as `inspect`, `list`, `forceRelease` and `events$` report them (see
 * `line-document.ts`): the same `LockState`, `LockHolderState` and `LockEvent` as the current
 * engine's, decoded by the server clock of the read, never with an owner token.
 */

/** An entry as {@link LINE_STATE_PROJECTION} reads it: no token. */
export type LineStateEntry = Omit<LineEntry, 't'>;

/** A line document as {@link LINE_STATE_PROJECTION} reads it, with the read's server time. */
export interface LineStateReply {
  _id: string;
  line?: LineStateEntry[];
  f?: LineDocument['f'];
  permits?: number | null;
  now?: Date;
}

/**
 * What a read of line documents projects: the entries without their tokens (whoever reads the
 * state must not be able to leave or renew), the fence, and the server time to decode it by.
 * A field an entry lacks (`m`, `w`, `sc`) is left out by MongoDB; the decoding also reads a
 * null as absent.
 */
export const LINE_STATE_PROJECTION = {
  line: {
    $map: {
      input: { $ifNull: ['$line', []] },
      in: {
        f: '$$this.f',
        e: '$$this.e',
        h: '$$this.h',
        m: '$$this.m',
        w: '$$this.w',
        sc: '$$this.sc',
      },
    },
  },
  f: 1,
  permits: 1,
  now: '$$NOW',
};

/**
 * How many entries at the front of the array `live` hold, as a pipeline expression: the same
 * rule as `holdingCount` in `line-document.ts`. In a semaphore (`permits` set, at least 1),
 * the leading entries whose weights sum to at most the permits (weights are positive, so the
 * running sum passes the permits once and stays past them); in a lock, the first entry alone
 * if it is exclusive, else the leading run of shared (`m: 's'`) entries.
 */
export function holdingCountExpression(live: unknown): Document {
  const sumFits = {
    $reduce: {
      input: '$$l',
      initialValue: { u: 0, n: 0 },
      in: {
        $let: {
          vars: { u: { $add: ['$$value.u', { $ifNull: ['$$this.w', 1] }] } },
          in: {
            u: '$$u',
            n: { $cond: [{ $lte: ['$$u', '$permits'] }, { $add: ['$$value.n', 1] }, '$$value.n'] },
          },
        },
      },
    },
  };
  const sharedRun = {
    $let: {
      vars: {
        i: { $indexOfArray: [{ $map: { input: '$$l', in: { $eq: ['$$this.m', 's'] } } }, false] },
      },
      in: { $cond: [{ $lt: ['$$i', 0] }, { $size: '$$l' }, '$$i'] },
    },
  };
  const firstShared = {
    $let: { vars: { x: { $arrayElemAt: ['$$l', 0] } }, in: { $eq: ['$$x.m', 's'] } },
  };
  return {
    $let: {
      vars: { l: live },
      in: {
        $cond: [
          '$permits',
          { $let: { vars: { r: sumFits }, in: '$$r.n' } },
          {
            $cond: [{ $eq: [{ $size: '$$l' }, 0] }, 0, { $cond: [firstShared, sharedRun, 1] }],
          },
        ],
      },
    },
  };
}

/** The entries of `line` whose lease has not ended at `now`, in line order. */
function live(line: readonly LineStateEntry[] | undefined, now: Date): LineStateEntry[] {
  return (line ?? []).filter((entry) => entry.e.getTime() > now.getTime());
}

/** The number of holders at the front of `entries` (`holdingCount` reads only `m` and `w`). */
function holding(entries: readonly LineStateEntry[], permits: number | null | undefined): number {
  return holdingCount(entries as readonly LineEntry[], permits ?? undefined);
}

function holderState(entry: LineStateEntry, now: Date): LockHolderState {
  return {
    holderId: entry.h,
    fence: firstFence(entry.f),
    weight: entry.w ?? 1,
    remainingMs: Math.max(0, entry.e.getTime() - now.getTime()),
    ...(typeof entry.sc === 'string' ? { scope: entry.sc } : {}),
  };
}

/** The holders of a line at server time `now`, in line order (earliest fence first). */
export function lineHolders(doc: LineStateReply, now: Date): LockHolderState[] {
  const entries = live(doc.line, now);
  return entries.slice(0, holding(entries, doc.permits)).map((entry) => holderState(entry, now));
}

/**
 * A key's state at server time `now` (the read's own `$$NOW`). `acquiredAt` is the latest
 * holder's join time read from its fence: a join's fence is the server clock in ms at the
 * join, or just above it when fences ran ahead of the clock on a busy key (each join takes
 * the last fence plus one); so it is at most a few ms late, and never after `now`.
 */
export function decodeLineState(doc: LineStateReply, now: Date): LockState {
  const entries = live(doc.line, now);
  const count = holding(entries, doc.permits);
  const base = { key: doc._id, fence: firstFence(doc.f), waiting: entries.length - count };
  if (count === 0) {
    return {
      ...base,
      held: false,
      holderId: null,
      remainingMs: 0,
      acquiredAt: null,
      expiresAt: null,
      mode: null,
      holders: [],
    };
  }
  const holders = entries.slice(0, count);
  const latest = holders[count - 1];
  const end = Math.max(...holders.map((entry) => entry.e.getTime()));
  const permits = doc.permits ?? undefined;
  return {
    ...base,
    held: true,
    holderId: latest.h,
    remainingMs: end - now.getTime(),
    acquiredAt: new Date(Math.min(Number(toBigInt(latest.f)), now.getTime())),
    expiresAt: new Date(end),
    mode: permits !== undefined ? 'semaphore' : holders[0].m === 's' ? 'shared' : 'exclusive',
    ...(permits !== undefined ? { permits } : {}),
    holders: holders.map((entry) => holderState(entry, now)),
  };
}

export type LineChangeEvent = ChangeStreamDocument<LineDocument>;

/** The change's server time, as the current engine's events tell it. */
function eventTime(change: LineChangeEvent): Date {
  if ('wallTime' in change && change.wallTime instanceof Date) return change.wallTime;
  if ('clusterTime' in change && change.clusterTime) return new Date(change.clusterTime.t * 1000);
  return new Date();
}

const acquired = (key: string, entry: LineStateEntry, at: Date): LockEvent => ({
  type: 'acquired',
  key,
  holderId: entry.h,
  fence: firstFence(entry.f),
  at,
});

/** The holders of a document as written: every entry of a written line was live at that write. */
function writtenHolders(doc: LineDocument | undefined): LineEntry[] {
  const line = doc?.line ?? [];
  return line.slice(0, holdingCount(line, doc?.permits ?? undefined));
}

/**
 * Where a join put its entry (the one whose fence is the document's new `f`), from the
 * change's own delta: its index in the line just after the write, which is how many entries
 * were ahead of it. Undefined when the delta does not show it.
 */
function joinedAt(updated: Document, fence: bigint): number | undefined {
  if (Array.isArray(updated.line)) {
    const index = (updated.line as LineEntry[]).findIndex((e) => toBigInt(e.f) === fence);
    return index < 0 ? undefined : index;
  }
  for (const [path, value] of Object.entries(updated)) {
    const whole = /^line\.(\d+)$/.exec(path);
    if (whole && toBigInt((value as LineEntry | null)?.f) === fence) return Number(whole[1]);
    const field = /^line\.(\d+)\.f$/.exec(path);
    if (field && toBigInt(value as LineEntry['f']) === fence) return Number(field[1]);
  }
  return undefined;
}

/**
 * A join (the document's `f` moved): `acquired` when the new entry held at the write, else
 * nothing (a waiter joined). Exact when the delta shows the entry first in line (the first
 * entry always holds) or shows an exclusive entry behind others (it never holds there), or
 * when the looked-up document still has it where the join put it (the same entries ahead).
 * Otherwise entries ahead have left since, and the looked-up document decides: an entry that
 * became holder by such a leave is reported here too (and again at that leave); one that has
 * already left is not reported unless the delta shows it first.
 */
function joinEvents(
  key: string,
  change: LineChangeEvent & { operationType: 'update' },
): LockEvent[] {
  const updated = change.updateDescription.updatedFields as Document;
  const fence = toBigInt(updated.f as LineEntry['f']);
  const at = eventTime(change);
  const index = joinedAt(updated, fence);
  const doc = change.fullDocument;
  const line = doc?.line ?? [];
  const there = line.findIndex((entry) => toBigInt(entry.f) === fence);
  const entry =
    line[there] ??
    (Array.isArray(updated.line) ? (updated.line as LineEntry[])[index ?? -1] : undefined) ??
    (updated[`line.${index}`] as LineEntry | undefined);
  if (!entry || typeof entry.h !== 'string') return [];
  if (index === 0) return [acquired(key, entry, at)];
  const lock = (doc?.permits ?? updated.permits) == null;
  if (index !== undefined && lock && entry.m !== 's') return [];
  if (there < 0) return [];
  return there < holdingCount(line, doc?.permits ?? undefined) ? [acquired(key, entry, at)] : [];
}

/** The line was emptied (a leave or renewal dropped its last entries), by the delta. */
function emptied(change: LineChangeEvent & { operationType: 'update' }): boolean {
  const { updatedFields, truncatedArrays, removedFields } = change.updateDescription;
  const line = (updatedFields as Document | undefined)?.line as unknown;
  return (
    (Array.isArray(line) && line.length === 0) ||
    (removedFields ?? []).includes('line') ||
    (truncatedArrays ?? []).some(
      (truncated) => truncated.field === 'line' && truncated.newSize === 0,
    )
  );
}

/**
 * What one change of the lock collection means as `LockEvent`s (no I/O):
 * - insert (a first join): `acquired` for its holder, exact (the inserted document);
 * - update of `f` (a join): see {@link joinEvents};
 * - update of `lead` (a leave, a forced or scope release): `released` with no holder id or
 *   fence (the delta does not say who left), then `acquired` for each holder of the looked-up
 *   document. That document may be a later state: holders that joined since are reported
 *   here too (and at their join), ones that left since are not; holders that held before the
 *   write are reported again (the other shared or semaphore holders, or an exclusive holder
 *   behind which a waiter gave up while `lead` did not name it yet: no release at all);
 * - an update that empties the line without `lead` changing (the last holder left while
 *   `lead` was already null, or a renewal found every lease ended): `released`;
 * - any other update (a renewal: only `line.N.e` and `gcAt`; a waiter that left without
 *   changing who leads): nothing. A lease that runs out is no event by itself;
 * - delete (the TTL index removed an idle document): `deleted`.
 * Engine v2 writes by upsert and update pipelines only; a `replace` gives nothing.
 */
export function lineEvents(change: LineChangeEvent): LockEvent[] {
  if (!('documentKey' in change) || typeof change.documentKey?._id !== 'string') return [];
  const key = change.documentKey._id;
  const at = eventTime(change);
  switch (change.operationType) {
    case 'insert':
      return writtenHolders(change.fullDocument).map((entry) => acquired(key, entry, at));
    case 'delete':
      return [{ type: 'deleted', key, holderId: null, fence: null, at }];
    case 'update': {
      const updated = (change.updateDescription?.updatedFields ?? {}) as Document;
      const released: LockEvent = { type: 'released', key, holderId: null, fence: null, at };
      if ('lead' in updated) {
        const holders = writtenHolders(change.fullDocument);
        return [released, ...holders.map((entry) => acquired(key, entry, at))];
      }
      if ('f' in updated) return joinEvents(key, change);
      return emptied(change) ? [released] : [];
    }
    default:
      return [];
  }
}
