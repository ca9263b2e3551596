import type { ChangeStreamDocument, Document } from 'mongodb';
import type { LockEvent, LockHolderState, LockState } from '../../interfaces/lock-state.interface';
import { toBigInt } from '../bson-values';
import type { LineDocument, LineEntry } from './line-document';
import { firstFence, holdersOf, holdingCount, liveEntries } from './line-document';
import { isLookAgainLead } from './line-pipelines';

/**
 * Lines as `inspect`, `list`, `forceRelease` and `events$` report them (`LockState`,
 * `LockEvent`), decoded by the read's server clock, never with an owner token.
 */

type LineStateEntry = Omit<LineEntry, 't'>;

export interface LineStateReply {
  _id: string;
  line?: LineStateEntry[];
  f?: LineDocument['f'];
  permits?: number | null;
  now?: Date;
}

/**
 * Entries without tokens (a state reader must not be able to leave or renew), the fence, and
 * the server time. MongoDB omits fields an entry lacks; decoding also reads null as absent.
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
 * `holdingCount` as a pipeline expression on the array `live`. A semaphore counts entries whose
 * running weight sum fits the permits: weights are positive, so once past it stays past.
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

function holderState(entry: LineStateEntry, now: Date): LockHolderState {
  return {
    holderId: entry.h,
    fence: firstFence(entry.f),
    weight: entry.w ?? 1,
    remainingMs: Math.max(0, entry.e.getTime() - now.getTime()),
    ...(typeof entry.sc === 'string' ? { scope: entry.sc } : {}),
  };
}

export function lineHolders(doc: LineStateReply, now: Date): LockHolderState[] {
  return holdersOf(doc, now).map((entry) => holderState(entry, now));
}

/**
 * A key's state at server time `now`. `fence` is the latest holder's (a free key's: the last
 * given). `acquiredAt` is the latest holder's fence read as ms: when it joined the line (the
 * server clock, or a little above it on a busy key: last fence plus one), capped at `now`; no
 * write records when a waiter came to hold.
 */
export function decodeLineState(doc: LineStateReply, now: Date): LockState {
  const entries = liveEntries(doc.line, now);
  const count = holdingCount(entries, doc.permits);
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
    fence: firstFence(latest.f),
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

/** From the delta: the new `f`'s entry index just after the write (entries ahead), if shown. */
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
 * A join (`f` moved): `acquired` if the new entry held at the write, else nothing. Exact when
 * the delta shows it first (always holds) or an exclusive entry behind others (never holds).
 * Otherwise the looked-up document decides (exact if the same entries are ahead): an entry
 * made holder by a later leave is reported here too (and at that leave); one gone is not.
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
  return there < holdingCount(line, doc?.permits) ? [acquired(key, entry, at)] : [];
}

/**
 * A leave of an exclusive lock's line (`lead` `<holder id> <token>`: ids never start with `*`,
 * `!` or `?`) whose delta leaves its first entry as it was: a waiter left, the holder holds on.
 */
function holderStays(updated: Document): boolean {
  const lead = updated.lead as unknown;
  if (typeof lead !== 'string' || /^[*!?]/.test(lead)) return false;
  return !Object.keys(updated).some((field) => /^line(\.0(\..*)?)?$/.test(field));
}

/** The delta shows the line emptied (a leave or renewal dropped its last entries). */
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
 * One change of the lock collection as `LockEvent`s (no I/O):
 * - insert (a first join): `acquired`; update of `f` (a join): see {@link joinEvents};
 * - update of `lead` (a leave, forced or scope release): `released` without holder or fence
 *   (the delta does not say who left; a waiter's leave may have freed nothing), then `acquired`
 *   per holder of the line as written when the delta carries it whole, else of the looked-up
 *   document, which may be later: holders repeat, or joined since;
 *   nothing when a waiter left an exclusive lock's line (its first entry unchanged);
 * - an update emptying the line without `lead` (e.g. a renewal ended every lease): `released`;
 * - replace (a pipeline update MongoDB logged whole, its delta not being smaller): from the
 *   document as written, with no delta to tell a join from a leave. Entries in line under a
 *   null `lead` (no leave since the line was last empty) make it a join: `acquired` for the
 *   newest entry if it holds (a renewal dropping ended entries repeats it). Otherwise as an
 *   update of `lead` (after a join behind a leader, the holders repeat);
 * - other updates (renewals, a lease cut short, waiters leaving): nothing;
 * - delete (TTL removed an idle document): `deleted`. A lease running out is no event itself.
 */
export function lineEvents(change: LineChangeEvent): LockEvent[] {
  if (!('documentKey' in change) || typeof change.documentKey?._id !== 'string') return [];
  const key = change.documentKey._id;
  const at = eventTime(change);
  const released: LockEvent = { type: 'released', key, holderId: null, fence: null, at };
  const acquiredBy = (entries: LineStateEntry[]) => entries.map((e) => acquired(key, e, at));
  switch (change.operationType) {
    case 'insert':
      return acquiredBy(holdersOf(change.fullDocument));
    case 'delete':
      return [{ type: 'deleted', key, holderId: null, fence: null, at }];
    case 'update': {
      const updated = (change.updateDescription?.updatedFields ?? {}) as Document;
      if ('lead' in updated && !isLookAgainLead(updated.lead)) {
        if (holderStays(updated)) return [];
        // A delta with the whole line is the document as written: its holders, not the lookup's.
        const { line, permits = change.fullDocument?.permits } = updated as Partial<LineDocument>;
        const written = Array.isArray(line) ? { line, permits } : change.fullDocument;
        return [released, ...acquiredBy(holdersOf(written))];
      }
      if ('f' in updated) return joinEvents(key, change);
      return emptied(change) ? [released] : [];
    }
    case 'replace': {
      const doc = change.fullDocument;
      const holders = holdersOf(doc);
      if (doc?.lead == null && (doc?.line?.length ?? 0) > 0) {
        const newest = toBigInt(doc?.f);
        return acquiredBy(holders.filter((entry) => toBigInt(entry.f) === newest));
      }
      return [released, ...acquiredBy(holders)];
    }
    default:
      return [];
  }
}
