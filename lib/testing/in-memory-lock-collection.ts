import { Long, Timestamp } from 'mongodb';
import type { LockState } from '../interfaces/lock-state.interface';
import type { LockDocument } from '../store/lock-document';
import { RELEASED_OWNERS_KEPT } from '../store/release-lease';
import type { ReleaseLeaseOutcome } from '../store/release-lease';
import { InMemoryChangeLog } from './in-memory-change-log';
import type { LockChangeDraft } from './in-memory-change-log';

/** A lock document as the in-memory collection keeps it: times in ms, the fence a bigint. */
interface StoredLock {
  _id: string;
  owner: string | null;
  holder: string | null;
  fence: bigint;
  acquiredAt: number | null;
  expiresAt: number | null;
  gcAt: number | null;
  scope?: string | null;
  /** Recent releases of live leases, each remembered until its lease would have ended. */
  releasedOwners?: { owner: string; until: number | null }[];
  releasedHolder?: string | null;
  releasedFence?: bigint;
}

export interface InMemoryAttemptReply {
  owner: string | null;
  holder: string | null;
  fence: bigint;
  remainingMs: number;
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

  /** `acquire-attempt.ts`: takes the key if free (no owner, or the lease ended), else reports the holder. */
  acquire(request: {
    key: string;
    owner: string;
    holder: string;
    ttlMs: number;
    scope?: string;
  }): InMemoryAttemptReply {
    const now = this.clock();
    const before = this.documents.get(request.key);
    const free = !before || before.owner === null || (before.expiresAt ?? -Infinity) <= now;
    // Held: every field keeps its value, so the write is a no-op, as on the server.
    const after = free ? taken(before, request, now) : before;
    const operationTime = this.write(request.key, before, after);
    return {
      owner: after.owner,
      holder: after.holder,
      fence: after.fence,
      remainingMs: remainingMs(after, now),
      operationTime,
    };
  }

  /** `renew-lease.ts`: extends a lease that `owner` still holds and that has not ended. */
  renew(request: { key: string; owner: string; ttlMs: number }): { remainingMs: number } | null {
    const now = this.clock();
    const before = this.documents.get(request.key);
    if (!before || before.owner !== request.owner || !((before.expiresAt ?? -Infinity) > now)) {
      return null;
    }
    const after = { ...before, expiresAt: now + request.ttlMs };
    this.write(request.key, before, after);
    return { remainingMs: remainingMs(after, now) };
  }

  /**
   * `release-lease.ts`: frees the key if `owner` holds it; a retry of a release that freed a
   * live lease is recognised by `releasedOwners` and reports `released` again.
   */
  release(request: { key: string; owner: string; idleRetentionMs: number }): ReleaseLeaseOutcome {
    const now = this.clock();
    const before = this.documents.get(request.key);
    const remembered = before?.releasedOwners ?? [];
    const recognised = remembered.some((release) => release.owner === request.owner);
    if (!before || (before.owner !== request.owner && !recognised)) return 'lost';
    if (before.owner !== request.owner) return 'released'; // released by an earlier try, while live
    const live = (before.expiresAt ?? now) - now > 0;
    // A retry after a lease's end could not have been protected anyway: forget it then.
    const previous = remembered.filter((release) => (release.until ?? -Infinity) > now);
    const withOurs = [...previous, { owner: request.owner, until: before.expiresAt }];
    this.write(request.key, before, {
      ...before,
      owner: null,
      // Not before the lease would have ended, so a retried release still finds the document.
      gcAt: Math.max(now + request.idleRetentionMs, before.expiresAt ?? -Infinity),
      releasedOwners: live ? withOurs.slice(-RELEASED_OWNERS_KEPT) : previous,
      releasedHolder: before.holder,
      releasedFence: before.fence,
    });
    return live ? 'released' : 'expired';
  }

  /** `inspect-lock.ts`: the key's state by the clock, never the owner token. */
  read(key: string): InMemoryReadReply {
    const now = this.clock();
    const stored = this.documents.get(key);
    const operationTime = this.clusterTime;
    if (!stored) return { state: null, operationTime };
    const held = stored.owner !== null && (stored.expiresAt ?? -Infinity) > now;
    return {
      state: {
        key,
        held,
        holderId: stored.holder,
        fence: stored.fence,
        remainingMs: held ? remainingMs(stored, now) : 0,
        acquiredAt: toDate(stored.acquiredAt),
        expiresAt: toDate(stored.expiresAt),
      },
      operationTime,
    };
  }

  /**
   * Ends the live lease on `key` now (of `owner` only, when given), as if it had run out: sets
   * `expiresAt` to the clock. Like a lease running out, this announces nothing (the change
   * touches `expiresAt` only, which no change stream filter lets through).
   */
  expire(key: string, owner?: string): boolean {
    const now = this.clock();
    const before = this.documents.get(key);
    if (!before || before.owner === null || !((before.expiresAt ?? -Infinity) > now)) return false;
    if (owner !== undefined && before.owner !== owner) return false;
    this.write(key, before, { ...before, expiresAt: now });
    return true;
  }

  /** `release-scope.ts`: frees every live lease of `scope`; how many. */
  releaseScope(scope: string, idleRetentionMs: number): number {
    const now = this.clock();
    let freed = 0;
    for (const [key, before] of [...this.documents]) {
      if (before.scope !== scope || before.owner === null) continue;
      if (!((before.expiresAt ?? -Infinity) > now)) continue;
      this.write(key, before, {
        ...before,
        owner: null,
        gcAt: Math.max(now + idleRetentionMs, before.expiresAt ?? -Infinity),
        releasedHolder: before.holder,
        releasedFence: before.fence,
      });
      freed += 1;
    }
    return freed;
  }

  /** The document as MongoDB would store it, or undefined (for change events' `fullDocument`). */
  lookUp(key: string): LockDocument | undefined {
    const stored = this.documents.get(key);
    return stored ? toLockDocument(stored) : undefined;
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
      const updatedFields = changedFields(toLockDocument(before), toLockDocument(after));
      if (Object.keys(updatedFields).length === 0) return this.clusterTime;
      draft = { operationType: 'update', key, updatedFields };
    }
    this.documents.set(key, after);
    this.clusterTime = nextClusterTime(this.clusterTime, this.clock());
    this.changes.append(draft, this.clusterTime, new Date(this.clock()));
    return this.clusterTime;
  }
}

/** The document once `request` has taken the key at `now`. */
function taken(
  before: StoredLock | undefined,
  request: { key: string; owner: string; holder: string; ttlMs: number; scope?: string },
  now: number,
): StoredLock {
  const nextFence = (before?.fence ?? 0n) + 1n;
  // Never below the clock in ms, so a key whose document was deleted still gets a larger fence.
  const clockFence = BigInt(Math.trunc(now));
  return {
    ...(before ?? { _id: request.key }),
    owner: request.owner,
    holder: request.holder,
    fence: nextFence > clockFence ? nextFence : clockFence,
    acquiredAt: now,
    expiresAt: now + request.ttlMs,
    gcAt: null,
    scope: request.scope ?? null,
  };
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

function toLockDocument(stored: StoredLock): LockDocument {
  const document: LockDocument = {
    _id: stored._id,
    owner: stored.owner,
    holder: stored.holder,
    fence: Long.fromBigInt(stored.fence),
    acquiredAt: toDate(stored.acquiredAt),
    expiresAt: toDate(stored.expiresAt),
    gcAt: toDate(stored.gcAt),
  };
  if (stored.releasedOwners !== undefined) {
    document.releasedOwners = stored.releasedOwners.map(({ owner, until }) => ({
      owner,
      until: toDate(until) as Date,
    }));
  }
  if (stored.scope !== undefined) document.scope = stored.scope;
  if (stored.releasedHolder !== undefined) document.releasedHolder = stored.releasedHolder;
  if (stored.releasedFence !== undefined) {
    document.releasedFence = Long.fromBigInt(stored.releasedFence);
  }
  return document;
}

/**
 * What an update event's `updatedFields` holds: the fields whose value changed, with an array
 * that only grew reported by its new elements (`releasedOwners.2`), as MongoDB reports the
 * delta of a pipeline update.
 */
function changedFields(before: LockDocument, after: LockDocument): Record<string, unknown> {
  const changed: Record<string, unknown> = {};
  const fields = Object.keys(after) as (keyof LockDocument)[];
  for (const field of fields) {
    const [was, is] = [before[field], after[field]];
    if (sameValue(was, is)) continue;
    if (Array.isArray(was) && Array.isArray(is) && grewFrom(was, is)) {
      for (let index = was.length; index < is.length; index += 1) {
        changed[`${field}.${index}`] = is[index];
      }
    } else {
      changed[field] = is;
    }
  }
  return changed;
}

function grewFrom(was: unknown[], is: unknown[]): boolean {
  return is.length > was.length && was.every((item, index) => sameValue(item, is[index]));
}

function sameValue(a: unknown, b: unknown): boolean {
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
