import type { Long, ObjectId } from 'mongodb';
import { toBigInt } from '../bson-values';
import type { BsonInteger } from '../bson-values';

/**
 * Engine v2's lock document: one per key, a line of entries in arrival order (ownership by
 * position, as etcd's Mutex). The holders are the longest compatible prefix of live entries.
 * Every write drops ended entries, so all entries of a written document were live at that write.
 */
export interface LineDocument {
  _id: string;
  line?: LineEntry[];
  /** The last fence handed out: never below the server clock in ms, so it survives `gcAt`. */
  f?: Long;
  /** A semaphore's permits; absent for a lock (exclusive and shared entries). */
  permits?: number;
  /** When the idle document may go (TTL index): after every lease plus the idle retention. */
  gcAt?: Date | null;
  /** Who the last leave may have made holder, for the streams' filters (`LEAD`). */
  lead?: string | null;
  /** Set by a locked transaction's check, so that the check is a write (`confirmInLine`). */
  tx?: ObjectId;
}

/** One acquisition call's place in the line (short field names: every write carries them). */
export interface LineEntry {
  /** The call's token: its owner check, and how a retry finds its own entry. */
  t: string;
  /** Fence number, set at join: line order is fence order. See {@link FENCES_PER_ENTRY}. */
  f: Long;
  /** Server time at which the lease ends. */
  e: Date;
  /** The holder id of the `LockService` whose call this is. */
  h: string;
  /** `'s'` for a shared entry; absent for an exclusive one. */
  m?: 's';
  /** Permits taken, in a semaphore; absent for 1. */
  w?: number;
  /** The call's owner scope (`releaseScope`), if any. */
  sc?: string;
  /** A document lock's entry whose join created the document (`createIfMissing`). */
  c?: true;
}

export type LineKind =
  | { readonly mode: 'exclusive' | 'shared' }
  | { readonly mode: 'permits'; readonly permits: number; readonly weight: number };

/** What deciding who holds reads of an entry (a state entry, without its token, has it too). */
type HoldingFields = Pick<LineEntry, 'e' | 'm' | 'w'>;

/** How many leading entries of `live` hold: one exclusive, a shared run, or permits that fit. */
export function holdingCount(
  live: readonly HoldingFields[],
  permits: number | null | undefined,
): number {
  if (permits != null) {
    let used = 0;
    let count = 0;
    for (const entry of live) {
      used += entry.w ?? 1;
      if (used > permits) break;
      count++;
    }
    return count;
  }
  if (live.length === 0) return 0;
  if (live[0].m !== 's') return 1;
  let count = 0;
  while (count < live.length && live[count].m === 's') count++;
  return count;
}

/**
 * Number `f` stands for fences f·16 to f·16 + 15: the first holder gets f·16, each local
 * hand-over without a write (`line-handover.ts`) the next. Fences increase along the line.
 */
export const FENCES_PER_ENTRY = 16n;

export function firstFence(number: BsonInteger | null | undefined): bigint {
  return toBigInt(number) * FENCES_PER_ENTRY;
}

/** The first fence of the entry that a holder's `fence` came from (itself, or a hand-over's). */
export function entryFenceOf(fence: bigint): bigint {
  return fence - (fence % FENCES_PER_ENTRY);
}

/**
 * A holding entry as news names it. A retried join can re-add a token whose entry ended: the
 * fence tells the two apart, so news of the first never reaches the second.
 */
export interface HoldingEntry {
  t: string;
  fence: bigint;
}

export function holdingEntry(entry: Pick<LineEntry, 't' | 'f'>): HoldingEntry {
  return { t: entry.t, fence: firstFence(entry.f) };
}

/** A call's entry as the line stands at server time `now`. */
export interface LinePlace {
  holds: boolean;
  fence: bigint;
  remainingMs: number;
  /** Live entries ahead of it. */
  ahead: number;
  /** Until the first lease ahead ends by itself (no write): when to look again; 0 when it holds. */
  aheadEndsInMs: number;
  /** Until it could hold, as far as the leases of the holders ahead tell; 0 when it holds. */
  holdsInMs: number;
  /** The holder id whose lease end that is (see {@link blockingHolder}); ours, when it holds. */
  blockerId: string;
}

export function liveEntries<E extends HoldingFields>(
  line: readonly E[] | undefined,
  now: Date,
): E[] {
  return (line ?? []).filter((entry) => entry.e.getTime() > now.getTime());
}

/** Where `token`'s entry stands in `doc` at `now`; undefined if it has no live entry. */
export function placeOf(doc: LineDocument, token: string, now: Date): LinePlace | undefined {
  const live = liveEntries(doc.line, now);
  const index = live.findIndex((entry) => entry.t === token);
  if (index < 0) return undefined;
  const entry = live[index];
  const holds = index < holdingCount(live, doc.permits);
  const ahead = live.slice(0, index);
  const aheadEnds = ahead.map((other) => other.e.getTime());
  const blocker = holds ? entry : (blockingHolder(ahead, doc.permits, entry.w ?? 1) ?? entry);
  return {
    holds,
    fence: firstFence(entry.f),
    remainingMs: entry.e.getTime() - now.getTime(),
    ahead: index,
    aheadEndsInMs: holds ? 0 : Math.max(0, Math.min(...aheadEnds) - now.getTime()),
    holdsInMs: holds ? 0 : Math.max(0, blocker.e.getTime() - now.getTime()),
    blockerId: blocker.h,
  };
}

/** The holding prefix of `entries` (live ones). */
function leadingHolders<E extends HoldingFields>(
  entries: readonly E[],
  permits: number | null | undefined,
): E[] {
  return entries.slice(0, holdingCount(entries, permits));
}

/** The holders of a line at `now`; without `now`, of a line as written (each entry live then). */
export function holdersOf<E extends HoldingFields>(
  doc: { line?: readonly E[]; permits?: number | null } | undefined,
  now?: Date,
): E[] {
  const line = doc?.line ?? [];
  return leadingHolders(now ? liveEntries(line, now) : line, doc?.permits);
}

/**
 * The holder among `ahead` (live entries, in line order) whose lease end is the earliest an entry
 * of `weight` behind them all could hold, as far as the holders' leases tell (the waiters ahead
 * stay): a lock's entry waits for every holder, a semaphore's until the holders left free its
 * weight and the waiters'. Undefined when nobody holds.
 */
export function blockingHolder<E extends HoldingFields>(
  ahead: readonly E[],
  permits: number | null | undefined,
  weight: number,
): E | undefined {
  const byEnd = leadingHolders(ahead, permits).sort((a, b) => a.e.getTime() - b.e.getTime());
  if (permits == null) return byEnd.at(-1);
  // Permits taken by every entry ahead and the request: each holder that ends gives its back.
  let taken = ahead.reduce((sum, entry) => sum + (entry.w ?? 1), weight);
  for (const holder of byEnd) {
    taken -= holder.w ?? 1;
    if (taken <= permits) return holder;
  }
  return byEnd.at(-1);
}
