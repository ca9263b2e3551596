import { Long, Timestamp } from 'mongodb';
import type { LockHolderState, LockState } from '../interfaces/lock-state.interface';
import type { ListLocksQuery } from '../store/list-locks';
import { lastReservedFence } from '../store/direct-grant';
import { exclusiveLockState } from '../store/inspect-lock';
import type { LockDocument } from '../store/lock-document';
import {
  EXCLUSIVE,
  MAX_HOLDERS_PER_KEY,
  RELEASED_ENTRIES_KEPT,
  RESERVATION_TTL_MS,
  entrySlot,
  isEntryMode,
  isEntryOwner,
} from '../store/lock-modes';
import type { LockModeRequest } from '../store/lock-modes';
import { RELEASED_OWNERS_KEPT } from '../store/release-lease';
import type { ReleaseLeaseOutcome, ReleaseLeaseRequest } from '../store/release-lease';
import { InMemoryChangeLog } from './in-memory-change-log';
import type { LockChangeDraft } from './in-memory-change-log';

/** A shared holder's or permit holder's entry in `holders`, times in ms. */
interface StoredEntry {
  owner: string;
  holder: string;
  fence: bigint;
  weight: number;
  acquiredAt: number;
  expiresAt: number;
  scope: string | null;
  /** Set by its release; the entry is dropped at the key's next grant. */
  releasedAt?: number | null;
}

/** A waiting process's reservation in `waiting`, times in ms. */
interface StoredReservation {
  weight: number;
  since: number;
  expiresAt: number;
}

/**
 * A lock document as the in-memory collection keeps it: times in ms, fences as bigints. A
 * field is absent where MongoDB's document would lack it (a key only ever held by holder
 * entries has no `owner`).
 */
interface StoredLock {
  _id: string;
  owner?: string | null;
  holder?: string | null;
  fence?: bigint;
  acquiredAt?: number | null;
  expiresAt?: number | null;
  gcAt?: number | null;
  scope?: string | null;
  permits?: number | null;
  holders?: Record<string, StoredEntry>;
  waiting?: Record<string, StoredReservation>;
  frees?: number;
  /** Recent releases of live leases: a ring written at `releasedNext`. */
  releasedOwners?: { owner: string; fence: bigint; until: number | null }[];
  releasedNext?: number;
  releasedHolder?: string | null;
  releasedFence?: bigint;
}

/** One acquisition attempt, as `attemptPipeline` takes it. */
export interface InMemoryAttemptRequest {
  key: string;
  owner: string;
  holder: string;
  ttlMs: number;
  scope?: string;
  /** Exclusive when absent. */
  mode?: LockModeRequest;
  /** The waiting process's reservation id, when the attempt is made while waiting. */
  reservation?: string;
}

/** The attempt's reply: what `acquire-attempt.ts` projects from the document after the write. */
export interface InMemoryAttemptReply {
  owner: string | null;
  holder: string | null;
  fence: bigint;
  /** The exclusive lease's remaining time (0 when none). */
  remainingMs: number;
  exclusiveLive: boolean;
  /** Entry modes: the attempt's entry, if the key has it (live or not). */
  entry: { owner: string; fence: bigint; expiresAt: number; releasedAt: number | null } | undefined;
  /** Entry modes: until the attempt's entry ends (may be negative); null without an entry. */
  entryRemainingMs: number | null;
  liveHolders: number;
  /** How the key is used now, when that is not how this attempt asked for it. */
  conflict: boolean;
  permits: number | null;
  /** Until the earliest live lease or foreign reservation ends; null when none. */
  waitMs: number | null;
  /** Until the attempt's reservation ends (may be negative); null without one. */
  reservedMs: number | null;
  operationTime: Timestamp;
}

export interface InMemoryReadReply {
  state: LockState | null;
  operationTime: Timestamp;
}

/**
 * The lock collection of `nestjs-mongo-lock/testing`: the same documents and the same
 * server-side decisions as the MongoDB store's commands (lib/store), made synchronously on a
 * map. Every decision reads the collection's own clock, as the server's `$$NOW`; a write that
 * changes nothing is a no-op that logs no change, as on the server.
 */
export class InMemoryLockCollection {
  private readonly documents = new Map<string, StoredLock>();
  /** The cluster time of the last write; reads report it as their operationTime. */
  private clusterTime = new Timestamp({ t: 0, i: 0 });

  constructor(
    /** The server clock, in ms since the epoch. */
    readonly clock: () => number,
    readonly changes: InMemoryChangeLog,
  ) {}

  /**
   * `attempt-pipeline.ts` and `acquire-attempt.ts`: one upserting attempt in any mode. Takes
   * the key (the exclusive lease, or a holder entry) when the rules allow it, records or
   * refreshes the waiting process's reservation when it must wait, and otherwise writes
   * nothing. Replies with the state after the write.
   */
  acquire(request: InMemoryAttemptRequest): InMemoryAttemptReply {
    const now = this.clock();
    const mode = request.mode ?? EXCLUSIVE;
    const before = this.documents.get(request.key);
    // An upsert: a missing document is decided as `{ _id }` and inserted whatever the outcome.
    const after = attempted(before ?? { _id: request.key }, request, mode, now);
    const operationTime = this.write(request.key, before, after);
    return attemptReply(after, request, mode, now, operationTime);
  }

  /**
   * `renew-lease.ts` / `holder-entries.ts` (`renewEntry`): extends a lease that `owner` still
   * holds and that has not ended (for an entry: nor been released).
   */
  renew(request: { key: string; owner: string; ttlMs: number }): { remainingMs: number } | null {
    const now = this.clock();
    const before = this.documents.get(request.key);
    if (!before) return null;
    if (isEntryOwner(request.owner)) {
      const slot = entrySlot(request.owner);
      const entry = before.holders?.[slot];
      if (entry?.owner !== request.owner || !isLiveEntry(entry, now)) return null;
      const renewed = { ...entry, expiresAt: now + request.ttlMs };
      // A live holder's document is never due for deletion.
      this.write(request.key, before, { ...withEntry(before, slot, renewed), gcAt: null });
      return { remainingMs: Math.max(0, renewed.expiresAt - now) };
    }
    if (before.owner !== request.owner || !((before.expiresAt ?? -Infinity) > now)) return null;
    const after = { ...before, expiresAt: now + request.ttlMs };
    this.write(request.key, before, after);
    return { remainingMs: remainingMs(after, now) };
  }

  /**
   * `release-lease.ts`: frees the key if `owner` holds it; a retry of a release that freed a
   * live lease is recognised by `releasedOwners` (by its fence, else by token while that lease
   * would last) and reports `released` again. An entry's owner token releases its entry
   * (`holder-entries.ts`, `releaseEntry`).
   */
  release(request: ReleaseLeaseRequest): ReleaseLeaseOutcome {
    if (isEntryOwner(request.owner)) return this.releaseEntry(request);
    const now = this.clock();
    const before = this.documents.get(request.key);
    const remembered = before?.releasedOwners ?? [];
    const recognised = remembered.some(
      (release) =>
        release.owner === request.owner &&
        (request.fence === undefined
          ? (release.until ?? -Infinity) > now
          : release.fence === request.fence),
    );
    if (!before || (before.owner !== request.owner && !recognised)) return 'lost';
    if (before.owner !== request.owner) return 'released'; // released by an earlier try, while live
    const live = (before.expiresAt ?? now) - now > 0;
    // A caller handed the lock without a write ends a later fence of the lease's block.
    const fence =
      request.fence !== undefined && request.fence > (before.fence ?? 0n)
        ? request.fence
        : before.fence;
    this.write(request.key, before, {
      ...before,
      owner: null,
      // Not before the lease would have ended, so a retried release still finds the document;
      // never while shared holders live.
      gcAt:
        liveEntries(before, now).length > 0
          ? before.gcAt
          : gcNotBeforeNextFence(
              before,
              Math.max(now + request.idleRetentionMs, before.expiresAt ?? -Infinity),
            ),
      // A retry after a lease's end could not have been protected anyway: not remembered.
      ...(live ? withOurRelease(before, request.owner, fence) : {}),
      releasedHolder: before.holder,
      releasedFence: fence,
    });
    return live ? 'released' : 'expired';
  }

  /**
   * `holder-entries.ts` (`withdrawReservation`): a waiting process leaves; its reservation
   * goes and `frees` counts the write (attempts it held back may now win).
   */
  withdraw(key: string, reservation: string): void {
    const before = this.documents.get(key);
    if (!before?.waiting || !Object.hasOwn(before.waiting, reservation)) return;
    const waiting = { ...before.waiting };
    delete waiting[reservation];
    this.write(key, before, { ...before, waiting, frees: (before.frees ?? 0) + 1 });
  }

  /**
   * `holder-entries.ts` (`keepReservation`): a parked waiting process renews its live place;
   * its remaining lease, or `undefined` if the key keeps no live place of ours.
   */
  keepPlace(key: string, reservation: string): number | undefined {
    const now = this.clock();
    const before = this.documents.get(key);
    const place = before?.waiting?.[reservation];
    if (!before || !place || place.expiresAt <= now) return undefined;
    const waiting = {
      ...before.waiting,
      [reservation]: { ...place, expiresAt: now + RESERVATION_TTL_MS },
    };
    // An update as MongoDB's, which the stream's filters (as the store's) pass on to nobody.
    this.write(key, before, { ...before, waiting });
    return RESERVATION_TTL_MS;
  }

  /** `inspect-lock.ts`: the key's state by the clock, never the owner token. */
  read(key: string): InMemoryReadReply {
    const now = this.clock();
    const stored = this.documents.get(key);
    const operationTime = this.clusterTime;
    if (!stored) return { state: null, operationTime };
    const base = {
      key,
      holderId: stored.holder ?? null,
      fence: stored.fence ?? 0n,
      acquiredAt: toDate(stored.acquiredAt ?? null),
      expiresAt: toDate(stored.expiresAt ?? null),
    };
    const waiting = liveReservations(stored, now).length;
    const exclusive = isExclusiveLive(stored, now);
    const entries = liveEntries(stored, now).map(([, entry]) => entry);
    if (exclusive || entries.length === 0) {
      const remaining = exclusive ? remainingMs(stored, now) : 0;
      const state = exclusiveLockState(
        { ...base, held: exclusive, remainingMs: remaining },
        stored.scope,
      );
      return { state: { ...state, waiting }, operationTime };
    }
    entries.sort((a, b) => (a.fence < b.fence ? -1 : a.fence > b.fence ? 1 : 0));
    const latest = entries[entries.length - 1];
    const lastEnd = entries.reduce((end, entry) => (entry.expiresAt > end.expiresAt ? entry : end));
    const permits = stored.permits ?? undefined;
    return {
      state: {
        key,
        held: true,
        holderId: latest.holder,
        fence: stored.fence ?? 0n,
        remainingMs: Math.max(...entries.map((entry) => Math.max(0, entry.expiresAt - now))),
        acquiredAt: new Date(latest.acquiredAt),
        expiresAt: new Date(lastEnd.expiresAt),
        mode: permits === undefined ? 'shared' : 'semaphore',
        ...(permits === undefined ? {} : { permits }),
        holders: entries.map((entry) => ({
          holderId: entry.holder,
          fence: entry.fence,
          weight: entry.weight,
          remainingMs: Math.max(0, entry.expiresAt - now),
          ...(entry.scope ? { scope: entry.scope } : {}),
        })),
        waiting,
      },
      operationTime,
    };
  }

  /**
   * Ends live leases on `key` now, as if they had run out: sets their `expiresAt` to the
   * clock. With `owner`, only that acquisition's lease (exclusive, or its holder entry);
   * without, the exclusive lease or every live holder entry. Like a lease running out, this
   * announces nothing (the change touches `expiresAt` only, which no change stream filter lets
   * through). `false` if no such live lease.
   */
  expire(key: string, owner?: string): boolean {
    const now = this.clock();
    const before = this.documents.get(key);
    if (!before) return false;
    if (owner !== undefined && isEntryOwner(owner)) {
      const slot = entrySlot(owner);
      const entry = before.holders?.[slot];
      if (entry?.owner !== owner || !isLiveEntry(entry, now)) return false;
      this.write(key, before, withEntry(before, slot, { ...entry, expiresAt: now }));
      return true;
    }
    if (isExclusiveLive(before, now)) {
      if (owner !== undefined && before.owner !== owner) return false;
      this.write(key, before, { ...before, expiresAt: now });
      return true;
    }
    const live = liveEntries(before, now);
    if (owner !== undefined || live.length === 0) return false;
    const holders = { ...before.holders };
    for (const [slot, entry] of live) holders[slot] = { ...entry, expiresAt: now };
    this.write(key, before, { ...before, holders });
    return true;
  }

  /**
   * `release-scope.ts`, then `holder-entries.ts` (`releaseScopeEntries`): frees every live
   * lease of `scope`, exclusive ones first, then holder entries key by key (one write per
   * key, counted once in `frees`); how many leases.
   */
  releaseScope(scope: string, idleRetentionMs: number): number {
    const now = this.clock();
    let freed = 0;
    for (const [key, before] of [...this.documents]) {
      if (before.scope !== scope || before.owner == null) continue;
      if (!((before.expiresAt ?? -Infinity) > now)) continue;
      this.write(key, before, {
        ...before,
        owner: null,
        gcAt: gcNotBeforeNextFence(
          before,
          Math.max(now + idleRetentionMs, before.expiresAt ?? -Infinity),
        ),
        releasedHolder: before.holder,
        releasedFence: before.fence,
      });
      freed += 1;
    }
    for (const [key, before] of [...this.documents]) {
      const ofScope = liveEntries(before, now).filter(([, entry]) => entry.scope === scope);
      if (ofScope.length === 0) continue;
      // Removed, not marked released: their holders' renewals and releases report the loss.
      const holders = { ...before.holders };
      for (const [slot] of ofScope) delete holders[slot];
      // The last live holders gone: the idle document is scheduled for deletion.
      const lastGone =
        ofScope.length === liveEntries(before, now).length && !isExclusiveLive(before, now);
      const latestEntryEnd = Math.max(
        ...Object.values(before.holders ?? {}).map((other) => other.expiresAt),
      );
      const gcAt = lastGone
        ? gcNotBeforeNextFence(before, Math.max(now + idleRetentionMs, latestEntryEnd))
        : before.gcAt;
      this.write(key, before, { ...before, holders, frees: (before.frees ?? 0) + 1, gcAt });
      freed += ofScope.length;
    }
    return freed;
  }

  /** `list-locks.ts`: a page of keys in key order (UTF-8 bytes, as MongoDB sorts), as `read` reports each. */
  list({ prefix, after, limit }: ListLocksQuery): LockState[] {
    const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
    return [...this.documents.keys()]
      .filter((key) => key.startsWith(prefix) && (after === undefined || byBytes(key, after) > 0))
      .sort(byBytes)
      .slice(0, limit)
      .map((key) => this.read(key).state as LockState);
  }

  /**
   * `force-release.ts`: frees every live lease of `key` in one write (the exclusive lease as
   * `releaseScope` does, holder entries removed and counted in `frees`); who was released.
   */
  forceRelease(key: string, idleRetentionMs: number): LockHolderState[] {
    const now = this.clock();
    const before = this.documents.get(key);
    if (!before) return [];
    const released: LockHolderState[] = [];
    let after: StoredLock = before;
    if (isExclusiveLive(before, now)) {
      released.push({
        holderId: before.holder ?? null,
        fence: before.fence ?? 0n,
        weight: 1,
        remainingMs: remainingMs(before, now),
        ...(before.scope ? { scope: before.scope } : {}),
      });
      after = {
        ...after,
        owner: null,
        gcAt: gcNotBeforeNextFence(
          before,
          Math.max(now + idleRetentionMs, before.expiresAt ?? -Infinity),
        ),
        releasedHolder: before.holder,
        releasedFence: before.fence,
      };
    }
    const live = liveEntries(before, now);
    if (live.length > 0) {
      const holders = { ...before.holders };
      for (const [slot, entry] of live) {
        delete holders[slot];
        released.push({
          holderId: entry.holder,
          fence: entry.fence,
          weight: entry.weight,
          remainingMs: Math.max(0, entry.expiresAt - now),
          ...(entry.scope ? { scope: entry.scope } : {}),
        });
      }
      const latestEntryEnd = Math.max(
        ...Object.values(before.holders ?? {}).map((other) => other.expiresAt),
      );
      const gcAt = gcNotBeforeNextFence(before, Math.max(now + idleRetentionMs, latestEntryEnd));
      after = { ...after, holders, frees: (before.frees ?? 0) + 1, gcAt };
    }
    if (released.length > 0) this.write(key, before, after);
    return released.sort((a, b) => (a.fence < b.fence ? -1 : a.fence > b.fence ? 1 : 0));
  }

  /** The document as MongoDB would store it, or undefined (for change events' `fullDocument`). */
  lookUp(key: string): LockDocument | undefined {
    const stored = this.documents.get(key);
    return stored ? toLockDocument(stored) : undefined;
  }

  /** `holder-entries.ts` (`releaseEntry`): marks the entry released and counts it in `frees`. */
  private releaseEntry(request: {
    key: string;
    owner: string;
    idleRetentionMs: number;
  }): ReleaseLeaseOutcome {
    const now = this.clock();
    const before = this.documents.get(request.key);
    const slot = entrySlot(request.owner);
    const entry = before?.holders?.[slot];
    if (!before || entry?.owner !== request.owner) return 'lost';
    if (entry.releasedAt != null) return 'released'; // by an earlier try of this release
    const othersLive = liveEntries(before, now).some(([, other]) => other.owner !== request.owner);
    const latestEntryEnd = Math.max(
      ...Object.values(before.holders ?? {}).map((other) => other.expiresAt),
    );
    this.write(request.key, before, {
      ...withEntry(before, slot, { ...entry, releasedAt: now }),
      frees: (before.frees ?? 0) + 1,
      releasedHolder: entry.holder,
      releasedFence: entry.fence,
      gcAt:
        othersLive || isExclusiveLive(before, now)
          ? before.gcAt
          : // Not before any entry's lease would have ended: a retried release must find it.
            gcNotBeforeNextFence(before, Math.max(now + request.idleRetentionMs, latestEntryEnd)),
    });
    return entry.expiresAt - now > 0 ? 'released' : 'expired';
  }

  /**
   * Applies a write. A write that changes no field is a no-op (no new cluster time, no
   * change); any other takes the next cluster time and logs its change event.
   */
  private write(key: string, before: StoredLock | undefined, after: StoredLock): Timestamp {
    if (before === after) return this.clusterTime;
    let draft: LockChangeDraft;
    if (!before) {
      draft = { operationType: 'insert', key, fullDocument: toLockDocument(after) };
    } else {
      const delta = describeChange(toLockDocument(before), toLockDocument(after));
      const { updatedFields, removedFields } = delta;
      if (Object.keys(updatedFields).length === 0 && removedFields.length === 0) {
        return this.clusterTime;
      }
      draft = { operationType: 'update', key, updatedFields, removedFields };
    }
    this.documents.set(key, after);
    this.clusterTime = nextClusterTime(this.clusterTime, this.clock());
    this.changes.append(draft, this.clusterTime, new Date(this.clock()));
    return this.clusterTime;
  }
}

type Named<T> = [name: string, value: T];

function isExclusiveLive(stored: StoredLock, now: number): boolean {
  return stored.owner != null && (stored.expiresAt ?? -Infinity) > now;
}

function isLiveEntry(entry: StoredEntry, now: number): boolean {
  return entry.expiresAt > now && entry.releasedAt == null;
}

/** `LIVE_HOLDERS`: live, unreleased entries, in the document's order. */
function liveEntries(stored: StoredLock, now: number): Named<StoredEntry>[] {
  return Object.entries(stored.holders ?? {}).filter(([, entry]) => isLiveEntry(entry, now));
}

/** `RECENT_RELEASES`: released entries whose lease would still run, the latest few. */
function recentReleases(stored: StoredLock, now: number): Named<StoredEntry>[] {
  return Object.entries(stored.holders ?? {})
    .filter(([, entry]) => entry.releasedAt != null && entry.expiresAt > now)
    .slice(-RELEASED_ENTRIES_KEPT);
}

/** `LIVE_RESERVATIONS`: unexpired reservations, in the document's order. */
function liveReservations(stored: StoredLock, now: number): Named<StoredReservation>[] {
  return Object.entries(stored.waiting ?? {}).filter(([, waiter]) => waiter.expiresAt > now);
}

/** `oldest`: the earliest reservation (ties by name), or undefined. */
function oldest(queue: Named<StoredReservation>[]): Named<StoredReservation> | undefined {
  let head: Named<StoredReservation> | undefined;
  for (const candidate of queue) {
    const [name, { since }] = candidate;
    if (!head || since < head[1].since || (since === head[1].since && name < head[0])) {
      head = candidate;
    }
  }
  return head;
}

/** `conflictExpr`: the key is in use in another form than `mode` asks for. */
function conflicts(
  mode: LockModeRequest,
  permits: number | null | undefined,
  exclusiveLive: boolean,
  liveCount: number,
): boolean {
  const current = permits ?? null;
  if (mode.permits === undefined) return liveCount > 0 && current !== null;
  return exclusiveLive || (liveCount > 0 && current !== mode.permits);
}

/** `attemptPipeline`: the document after one attempt at `now` (the same object if unchanged). */
function attempted(
  doc: StoredLock,
  request: InMemoryAttemptRequest,
  mode: LockModeRequest,
  now: number,
): StoredLock {
  const { owner, holder, ttlMs, scope, reservation } = request;
  const entry = isEntryMode(mode);
  const slot = entrySlot(owner);
  const capacity = mode.permits ?? MAX_HOLDERS_PER_KEY;
  const exclusive = isExclusiveLive(doc, now);
  const live = liveEntries(doc, now);
  const queue = liveReservations(doc, now);
  const head = oldest(queue);
  const used = live.reduce((sum, [, held]) => sum + held.weight, 0);
  const count = live.length;
  const mine = queue.find(([name]) => name === reservation)?.[1];
  const headBlocks = head !== undefined && head[0] !== reservation;
  const conflict = conflicts(mode, doc.permits, exclusive, count);
  const alreadyOurs = entry
    ? live.some(([name]) => name === slot)
    : exclusive && doc.owner === owner;
  const grant = entry
    ? !exclusive &&
      !alreadyOurs &&
      !conflict &&
      count < MAX_HOLDERS_PER_KEY &&
      used + mode.weight + (headBlocks ? head[1].weight : 0) <= capacity
    : !exclusive && count === 0 && !headBlocks && !conflict;
  // An exclusive waiter holds back every permit.
  const weight = mode.mode === 'exclusive' ? MAX_HOLDERS_PER_KEY : mode.weight;
  // Only where fairness is at stake: a plain mutex with no shared holders and nobody
  // reserving writes nothing when it loses.
  const reserve =
    reservation !== undefined &&
    !grant &&
    !conflict &&
    // A retry of an attempt that won already holds: it must not queue behind itself.
    !alreadyOurs &&
    // Refused at the holder cap: the attempt fails, and must leave nothing behind.
    (entry ? count < MAX_HOLDERS_PER_KEY : count > 0 || queue.length > 0) &&
    (mine === undefined || mine.expiresAt < now + RESERVATION_TTL_MS / 2 || mine.weight !== weight);
  const othersQueued = queue.filter(([name]) => name !== reservation);
  // A grant drops our reservation and the expired ones; a reservation write refreshes ours.
  const waiting = reserve
    ? Object.fromEntries([
        ...othersQueued,
        [
          reservation,
          { weight, since: mine?.since ?? now, expiresAt: now + RESERVATION_TTL_MS },
        ] as Named<StoredReservation>,
      ])
    : grant && doc.waiting != null
      ? Object.fromEntries(othersQueued)
      : doc.waiting;
  if (!grant && waiting === doc.waiting) return doc;
  const after: StoredLock = { ...doc };
  // `acquire-attempt.ts` decides an exclusive attempt on a plain key (no live entry, no live
  // reservation) in the mutex's own pipeline, which leaves `holders` and `waiting` as they are.
  const plain = !entry && count === 0 && queue.length === 0;
  if (waiting !== undefined && !plain) after.waiting = waiting;
  // Our reservation held back more than we now take: the others hear of the room.
  const taken = grant
    ? entry
      ? mode.weight
      : MAX_HOLDERS_PER_KEY
    : reserve
      ? weight
      : MAX_HOLDERS_PER_KEY;
  if (mine !== undefined && mine.weight > taken) after.frees = (doc.frees ?? 0) + 1;
  if (!grant) return after;
  const recent = recentReleases(doc, now);
  const fence = nextFence(doc.fence, now);
  if (entry) {
    const granted: StoredEntry = {
      owner,
      holder,
      fence,
      weight: mode.weight,
      acquiredAt: now,
      expiresAt: now + ttlMs,
      scope: scope ?? null,
    };
    // Ended entries are dropped; recent releases stay, so a retried release knows its own.
    after.holders = Object.fromEntries([...recent, ...live, [slot, granted] as Named<StoredEntry>]);
    after.permits = mode.permits ?? null;
  } else {
    // Ended entries go with an exclusive grant (none is live then); recent releases stay.
    if (doc.holders != null && !plain) after.holders = Object.fromEntries(recent);
    after.owner = owner;
    after.holder = holder;
    after.acquiredAt = now;
    after.expiresAt = now + ttlMs;
    after.scope = scope ?? null;
  }
  after.fence = fence;
  after.gcAt = null;
  return after;
}

/** `acquire-attempt.ts`'s reply projection, on the document after the attempt. */
function attemptReply(
  after: StoredLock,
  request: InMemoryAttemptRequest,
  mode: LockModeRequest,
  now: number,
  operationTime: Timestamp,
): InMemoryAttemptReply {
  const exclusive = isExclusiveLive(after, now);
  const live = liveEntries(after, now);
  const foreignReservations = liveReservations(after, now).filter(
    ([name]) => name !== request.reservation,
  );
  // A shared or permit request may get in when the first blocking lease ends; an exclusive
  // one needs every holder gone (but the first foreign reservation still counts).
  const edge = isEntryMode(mode) ? Math.min : Math.max;
  const entryEnds = live.map(([, held]) => held.expiresAt);
  const reservationEnds = foreignReservations.map(([, waiter]) => waiter.expiresAt);
  const holderEnds = [
    ...(exclusive ? [after.expiresAt as number] : []),
    ...(entryEnds.length > 0 ? [edge(...entryEnds)] : []),
  ];
  // A reservation ahead of us may run out first (its waiter died): look again then.
  const ends = [
    ...(holderEnds.length > 0 ? [edge(...holderEnds)] : []),
    ...(reservationEnds.length > 0 ? [Math.min(...reservationEnds)] : []),
  ];
  const entry = isEntryMode(mode) ? after.holders?.[entrySlot(request.owner)] : undefined;
  const reserved =
    request.reservation === undefined ? undefined : after.waiting?.[request.reservation];
  return {
    owner: after.owner ?? null,
    holder: after.holder ?? null,
    fence: after.fence ?? 0n,
    remainingMs: remainingMs(after, now),
    exclusiveLive: exclusive,
    entry: entry && {
      owner: entry.owner,
      fence: entry.fence,
      expiresAt: entry.expiresAt,
      releasedAt: entry.releasedAt ?? null,
    },
    entryRemainingMs: entry ? entry.expiresAt - now : null,
    liveHolders: live.length,
    conflict: conflicts(mode, after.permits, exclusive, live.length),
    permits: after.permits ?? null,
    waitMs: ends.length === 0 ? null : Math.min(...ends) - now,
    reservedMs: reserved ? reserved.expiresAt - now : null,
    operationTime,
  };
}

/** `direct-grant.ts` (`gcNotBeforeNextFence`): not before the clock passes the next fence. */
function gcNotBeforeNextFence(before: StoredLock, gcAt: number): number {
  return Math.max(gcAt, Number(lastReservedFence(before.fence ?? 0n) + 1n));
}

/**
 * `direct-grant.ts` (`NEXT_FENCE`): past the block of fences the last lease reserved, never
 * below the clock in ms.
 */
function nextFence(fence: bigint | undefined, now: number): bigint {
  const next = lastReservedFence(fence ?? 0n) + 1n;
  // Never below the clock in ms, so a key whose document was deleted still gets a larger fence.
  const clockFence = BigInt(Math.trunc(now));
  return next > clockFence ? next : clockFence;
}

function withEntry(stored: StoredLock, slot: string, entry: StoredEntry): StoredLock {
  return { ...stored, holders: { ...stored.holders, [slot]: entry } };
}

function remainingMs(stored: StoredLock, now: number): number {
  return Math.max(0, (stored.expiresAt ?? now) - now);
}

function toDate(ms: number | null): Date | null {
  return ms === null ? null : new Date(ms);
}

/** Seconds of the clock, and an ordinal within the second; never going back. */
function nextClusterTime(last: Timestamp, nowMs: number): Timestamp {
  const seconds = Math.floor(nowMs / 1000);
  return seconds > last.t
    ? new Timestamp({ t: seconds, i: 1 })
    : new Timestamp({ t: last.t, i: last.i + 1 });
}

/**
 * Entries and reservations as documents, by stored object: stored ones are never changed in
 * place (a write stores new ones), so a document's unchanged entries are the same objects as
 * before it, and comparing them costs nothing even with a thousand holders.
 */
const asDocuments = new WeakMap<object, Record<string, unknown>>();

function cachedDocument<T extends object>(
  stored: T,
  convert: (value: T) => Record<string, unknown>,
): Record<string, unknown> {
  let document = asDocuments.get(stored);
  if (!document) asDocuments.set(stored, (document = convert(stored)));
  return document;
}

function entryDocument(entry: StoredEntry): Record<string, unknown> {
  const document: Record<string, unknown> = {
    owner: entry.owner,
    holder: entry.holder,
    fence: Long.fromBigInt(entry.fence),
    weight: entry.weight,
    acquiredAt: new Date(entry.acquiredAt),
    expiresAt: new Date(entry.expiresAt),
    scope: entry.scope,
  };
  if (entry.releasedAt !== undefined) document.releasedAt = toDate(entry.releasedAt);
  return document;
}

function mapValues<T extends object>(
  record: Record<string, T>,
  map: (value: T) => Record<string, unknown>,
): Record<string, Record<string, unknown>> {
  return Object.fromEntries(
    Object.entries(record).map(([name, value]) => [name, cachedDocument(value, map)]),
  );
}

/** The stored lock as MongoDB's document, with only the fields MongoDB's would have. */
function toLockDocument(stored: StoredLock): LockDocument {
  const document: Record<string, unknown> = { _id: stored._id };
  const set = (field: string, value: unknown) => {
    if (value !== undefined) document[field] = value;
  };
  const date = (ms: number | null | undefined) => (ms === undefined ? undefined : toDate(ms));
  set('owner', stored.owner);
  set('holder', stored.holder);
  set('fence', stored.fence === undefined ? undefined : Long.fromBigInt(stored.fence));
  set('acquiredAt', date(stored.acquiredAt));
  set('expiresAt', date(stored.expiresAt));
  set('gcAt', date(stored.gcAt));
  set('scope', stored.scope);
  set('permits', stored.permits);
  set('holders', stored.holders && mapValues(stored.holders, entryDocument));
  set(
    'waiting',
    stored.waiting &&
      mapValues(stored.waiting, (waiter) => ({
        weight: waiter.weight,
        since: new Date(waiter.since),
        expiresAt: new Date(waiter.expiresAt),
      })),
  );
  set('frees', stored.frees);
  set(
    'releasedOwners',
    stored.releasedOwners?.map(({ owner, fence, until }) => ({
      owner,
      fence: Long.fromBigInt(fence),
      until: toDate(until) as Date,
    })),
  );
  set('releasedNext', stored.releasedNext);
  set('releasedHolder', stored.releasedHolder);
  set(
    'releasedFence',
    stored.releasedFence === undefined ? undefined : Long.fromBigInt(stored.releasedFence),
  );
  return document as unknown as LockDocument;
}

/**
 * `release-lease.ts` (`withOurRelease`, `releaseSlot`): our release written into the ring of
 * the last {@link RELEASED_OWNERS_KEPT}: at the end of a list not yet full, else at
 * `releasedNext`.
 */
function withOurRelease(
  before: StoredLock,
  owner: string,
  fence: bigint | undefined,
): Pick<StoredLock, 'releasedOwners' | 'releasedNext'> {
  const ring = [...(before.releasedOwners ?? [])];
  const next = before.releasedNext ?? 0;
  const slot =
    ring.length < RELEASED_OWNERS_KEPT ? ring.length : next >= RELEASED_OWNERS_KEPT ? 0 : next;
  ring[slot] = { owner, fence: fence ?? 0n, until: before.expiresAt ?? null };
  return { releasedOwners: ring, releasedNext: (slot + 1) % RELEASED_OWNERS_KEPT };
}

/**
 * What an update event's description holds, as MongoDB reports the delta of a pipeline
 * update: the fields whose value changed, embedded documents descended into (`holders.h1f…`,
 * `holders.h1f….releasedAt`) unless their fields were reordered (then reported whole), an
 * array that did not shrink reported by its changed and new elements (`releasedOwners.2`,
 * `releasedOwners.0.owner`), and the embedded fields that went (`waiting.r2c…`) as removed.
 */
function describeChange(
  before: LockDocument,
  after: LockDocument,
): { updatedFields: Record<string, unknown>; removedFields: string[] } {
  const delta = { updatedFields: {} as Record<string, unknown>, removedFields: [] as string[] };
  diffObjects(
    before as unknown as Record<string, unknown>,
    after as unknown as Record<string, unknown>,
    '',
    delta,
  );
  return delta;
}

function diffObjects(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  prefix: string,
  delta: { updatedFields: Record<string, unknown>; removedFields: string[] },
): void {
  for (const field of Object.keys(before)) {
    if (!Object.hasOwn(after, field)) delta.removedFields.push(prefix + field);
  }
  for (const [field, is] of Object.entries(after)) {
    const path = prefix + field;
    if (!Object.hasOwn(before, field)) {
      delta.updatedFields[path] = is;
      continue;
    }
    const was = before[field];
    if (sameValue(was, is)) continue;
    if (isPlainObject(was) && isPlainObject(is) && sameOrder(was, is)) {
      diffObjects(was, is, `${path}.`, delta);
    } else if (Array.isArray(was) && Array.isArray(is) && is.length >= was.length) {
      diffArrays(was, is, path, delta);
    } else {
      delta.updatedFields[path] = is;
    }
  }
}

/** The fields both documents have come in the same order (else MongoDB reports it whole). */
function sameOrder(before: Record<string, unknown>, after: Record<string, unknown>): boolean {
  const kept = Object.keys(before).filter((field) => Object.hasOwn(after, field));
  const order = Object.keys(after).filter((field) => Object.hasOwn(before, field));
  return kept.every((field, index) => order[index] === field);
}

/** An array that did not shrink: its changed and new elements by index. */
function diffArrays(
  was: unknown[],
  is: unknown[],
  path: string,
  delta: { updatedFields: Record<string, unknown>; removedFields: string[] },
): void {
  is.forEach((item, index) => {
    const old = was[index];
    if (index < was.length && sameValue(old, item)) return;
    if (index < was.length && isPlainObject(old) && isPlainObject(item) && sameOrder(old, item)) {
      diffObjects(old, item, `${path}.${index}.`, delta);
    } else {
      delta.updatedFields[`${path}.${index}`] = item;
    }
  });
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  if (a instanceof Long && b instanceof Long) return a.equals(b);
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, index) => sameValue(item, b[index]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => sameValue(a[key], b[key]));
  }
  return a === b;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype
  );
}
