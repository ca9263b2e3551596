import { isDeepStrictEqual } from 'node:util';
import { Long } from 'mongodb';
import type { LockHolderState, LockState } from '../interfaces/lock-state.interface';
import type { ListLocksQuery } from '../store/list-locks';
import { checkJoin, decodeJoin, decodeLeave } from '../store/line/line-commands';
import type {
  JoinRequest,
  JoinResult,
  LeaveResult,
  RenewResult,
} from '../store/line/line-commands';
import { toBigInt } from '../store/bson-values';
import { FENCES_PER_ENTRY, firstFence, holdersOf, holdingCount } from '../store/line/line-document';
import { liveEntries, placeOf } from '../store/line/line-document';
import type { LineDocument, LineEntry, LinePlace } from '../store/line/line-document';
import { LINE_CAPACITY, LOOK_AGAIN_LEAD } from '../store/line/line-pipelines';
import type { LineChangeEvent } from '../store/line/line-state';
import { decodeLineState, lineHolders } from '../store/line/line-state';
import { operatorLead, type ScopeHoldersRemoved } from '../store/line/line-admin';

/**
 * Engine v2's lock collection in memory: `line-document.ts` documents written by the rules of
 * `line-pipelines.ts` and `line-admin.ts`, and change events, all read by the store's decoders.
 * `test/testing/line-storage.contract.e2e-spec.ts` runs one script here and on MongoDB. Every
 * method decides at once by `clock`; the connections add the reply's promise turn.
 */
export class InMemoryLines {
  private readonly docs = new Map<string, LineDocument>();
  private readonly listeners = new Set<(change: LineChangeEvent) => void>();

  constructor(readonly clock: () => number) {}

  /** Hears every write from now on, as a change stream of the whole collection would. */
  subscribe(listener: (change: LineChangeEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** `joinPipeline`: joins if the form fits, there is room and (for a try) the entry holds. */
  join(request: JoinRequest): JoinResult {
    checkJoin(request);
    const now = this.now();
    const doc = this.docs.get(request.key) ?? { _id: request.key };
    const live = liveEntries(doc.line, now);
    const { kind } = request;
    const permits = kind.mode === 'permits' ? kind.permits : undefined;
    const fence = nextFence(doc, now);
    const entry: LineEntry = {
      t: request.token,
      f: fence,
      e: new Date(now.getTime() + request.ttlMs),
      h: request.holderId,
      ...(kind.mode === 'shared' ? { m: 's' as const } : {}),
      ...(kind.mode === 'permits' ? { w: kind.weight } : {}),
      ...(request.scope === undefined ? {} : { sc: request.scope }),
    };
    const line = [...live, entry];
    const joins =
      (live.length === 0 || doc.permits === permits) &&
      !live.some((other) => other.t === request.token) &&
      live.length < LINE_CAPACITY &&
      // `wouldHold`: the new entry, last in line, would hold at once.
      (!request.onlyIfHolds || holdingCount(line, permits) === line.length);
    if (!joins) return decodeJoin({ ...doc, now }, request);
    const { permits: _formerPermits, ...rest } = doc;
    const after: LineDocument = {
      ...rest,
      f: fence,
      line,
      ...(permits === undefined ? {} : { permits }),
      gcAt: gcAfterLease(doc, fence, now, request.ttlMs + request.idleRetentionMs),
    };
    this.write(doc, after, now);
    return decodeJoin({ ...after, now }, request);
  }

  /** `LEAVE_PIPELINE`: our entry and the dead ones go; `lead` names who may hold now. */
  leave(key: string, token: string): LeaveResult {
    const now = this.now();
    const before = this.docs.get(key);
    if (!before?.line?.some((entry) => entry.t === token)) return { left: false, holders: [] };
    const line = liveEntries(before.line, now).filter((entry) => entry.t !== token);
    // `LEAD`: the exclusive entry now first, else (shared, a semaphore) every process looks;
    // nobody left: null.
    const first = line.at(0);
    const everyone = first?.m === 's' || (first !== undefined && before.permits !== undefined);
    const lead = everyone ? `* ${token}` : first ? `${first.h} ${first.t}` : null;
    this.write(before, { ...before, line, lead }, now);
    return decodeLeave(before, token, now, true);
  }

  /**
   * `RENEW_PIPELINE`: the dead entries go, ours (if live) ends `ttlMs` from now at the
   * earliest (`EXPIRE_PIPELINE`, `exactly`: at that time, and every process's waiters look).
   */
  renew(
    key: string,
    token: string,
    ttlMs: number,
    idleRetentionMs: number,
    exactly = false,
  ): RenewResult {
    const now = this.now();
    const before = this.docs.get(key);
    if (!before?.line?.some((entry) => entry.t === token)) return { renewed: false };
    const end = now.getTime() + ttlMs;
    const line = liveEntries(before.line, now).map((entry) =>
      entry.t === token
        ? { ...entry, e: new Date(exactly ? end : Math.max(end, entry.e.getTime())) }
        : entry,
    );
    const gcAt = gcAfterLease(before, before.f, now, ttlMs + idleRetentionMs);
    const lead = exactly ? { lead: `${LOOK_AGAIN_LEAD}${token}` } : {};
    const after = { ...before, line, gcAt, ...lead };
    this.write(before, after, now);
    const place = placeOf(after, token, now);
    return place ? { renewed: true, ...place } : { renewed: false };
  }

  place(key: string, token: string): LinePlace | undefined {
    const doc = this.docs.get(key);
    return doc && placeOf(doc, token, this.now());
  }

  inspect(key: string): LockState | null {
    const doc = this.docs.get(key);
    return doc ? decodeLineState(doc, this.now()) : null;
  }

  /** Keys in MongoDB's `_id` order for strings: by their UTF-8 bytes. */
  list({ prefix, after, limit }: ListLocksQuery): LockState[] {
    const now = this.now();
    const order = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
    return [...this.docs.keys()]
      .filter((key) => key.startsWith(prefix) && (after === undefined || order(key, after) > 0))
      .sort(order)
      .slice(0, limit)
      .map((key) => decodeLineState(this.docs.get(key) as LineDocument, now));
  }

  /**
   * `forceReleaseLine`: the holders go (with `fences`, those among them: none, no write); the
   * waiters stay in order and every process looks.
   */
  forceRelease(
    key: string,
    idleRetentionMs: number,
    fences?: readonly bigint[],
  ): LockHolderState[] {
    const now = this.now();
    const before = this.docs.get(key);
    const live = liveEntries(before?.line, now);
    if (!before || live.length === 0) return [];
    const count = holdingCount(live, before.permits);
    const listed = new Set(fences?.map((fence) => fence / FENCES_PER_ENTRY));
    const goes = (entry: LineEntry, index: number) =>
      index < count && (fences === undefined || listed.has(toBigInt(entry.f)));
    const removed = new Set(live.filter(goes).map((entry) => firstFence(entry.f)));
    if (fences !== undefined && removed.size === 0) return [];
    const stays = live.filter((entry, index) => !goes(entry, index));
    this.clearEntries(before, stays, now, idleRetentionMs);
    return lineHolders(before, now).filter((holder) => removed.has(holder.fence));
  }

  /** `releaseScopeInLines`: every entry of `scope` goes; the keys whose holders went, with them. */
  releaseScope(scope: string, idleRetentionMs: number): ScopeHoldersRemoved[] {
    const now = this.now();
    const removed: ScopeHoldersRemoved[] = [];
    for (const before of [...this.docs.values()]) {
      const live = liveEntries(before.line, now);
      if (!live.some((entry) => entry.sc === scope)) continue;
      const line = live.filter((entry) => entry.sc !== scope);
      this.clearEntries(before, line, now, idleRetentionMs);
      const holders = lineHolders(before, now).filter((holder) => holder.scope === scope);
      if (holders.length > 0) removed.push({ key: before._id, holders });
    }
    return removed;
  }

  /**
   * Ends the leases of `key`'s holders now (only `token`'s entry, when given), as if they had
   * run out: not a write, so nothing is streamed. True if a live lease ended.
   */
  expire(key: string, token?: string): boolean {
    const now = this.now();
    const doc = this.docs.get(key);
    const ended =
      token === undefined
        ? holdersOf(doc, now)
        : liveEntries(doc?.line, now).filter((entry) => entry.t === token);
    for (const entry of ended) entry.e = now;
    return ended.length > 0;
  }

  private clearEntries(before: LineDocument, line: LineEntry[], now: Date, idleMs: number): void {
    const gcAt =
      line.length === 0
        ? maxDate(new Date(now.getTime() + idleMs), fenceTime(before.f))
        : before.gcAt;
    const lead = operatorLead();
    this.write(before, { ...before, line, gcAt, lead }, now);
  }

  private now(): Date {
    return new Date(this.clock());
  }

  /** Stores `after` and streams the change, as MongoDB reports a write that changed fields. */
  private write(before: LineDocument, after: LineDocument, now: Date): void {
    this.docs.set(after._id, after);
    const fullDocument = copyOf(after);
    const event = { documentKey: { _id: after._id }, fullDocument, wallTime: now };
    let change = { operationType: 'insert', ...event } as LineChangeEvent;
    if (before.line !== undefined || before.f !== undefined) {
      const updatedFields: Record<string, unknown> = {};
      const removedFields: string[] = [];
      const truncatedArrays: { field: string; newSize: number }[] = [];
      for (const field of ['f', 'line', 'permits', 'gcAt', 'lead'] as const) {
        if (after[field] === undefined) {
          if (before[field] !== undefined) removedFields.push(field);
        } else if (field === 'line') {
          Object.assign(updatedFields, lineDelta(before.line, fullDocument.line ?? []));
          const newSize = fullDocument.line?.length ?? 0;
          if (newSize < (before.line?.length ?? 0) && !('line' in updatedFields)) {
            truncatedArrays.push({ field: 'line', newSize });
          }
        } else if (!isDeepStrictEqual(before[field], after[field])) {
          updatedFields[field] = after[field];
        }
      }
      if (Object.keys(updatedFields).length === 0 && removedFields.length === 0) return;
      const updateDescription = { updatedFields, removedFields, truncatedArrays };
      change = {
        operationType: 'update',
        ...event,
        updateDescription,
      } as unknown as LineChangeEvent;
    }
    for (const listener of [...this.listeners]) listener(change);
  }
}

/**
 * `line`'s change as MongoDB's delta reports an array: whole when its first entry changed, else
 * by index (`line.1`), the entries cut off as a truncation (`events$` reads it so).
 */
function lineDelta(before: LineEntry[] | undefined, after: LineEntry[]): Record<string, unknown> {
  if (!before?.length || !after.length || !isDeepStrictEqual(before[0], after[0])) {
    return isDeepStrictEqual(before, after) ? {} : { line: after };
  }
  const changed: Record<string, unknown> = {};
  after.forEach((entry, index) => {
    if (!isDeepStrictEqual(before[index], entry)) changed[`line.${index}`] = entry;
  });
  return changed;
}

/** `NEXT_FENCE`: the last fence plus one, never below the clock in ms. */
function nextFence(doc: LineDocument, now: Date): Long {
  const clock = BigInt(now.getTime());
  const next = doc.f === undefined ? clock : doc.f.toBigInt() + 1n;
  return Long.fromBigInt(next > clock ? next : clock);
}

function fenceTime(fence: Long | undefined): Date | undefined {
  return fence === undefined ? undefined : new Date(fence.toNumber());
}

/** `GC_AFTER_LEASE`: only later, past the lease plus retention and the last fence. */
function gcAfterLease(doc: LineDocument, fence: Long | undefined, now: Date, ms: number): Date {
  return maxDate(doc.gcAt ?? undefined, new Date(now.getTime() + ms), fenceTime(fence));
}

function maxDate(...dates: (Date | undefined)[]): Date {
  return new Date(Math.max(...dates.map((date) => date?.getTime() ?? -Infinity)));
}

/** A copy that readers of a change cannot alter the store through (dates are never mutated). */
function copyOf(doc: LineDocument): LineDocument {
  return { ...doc, ...(doc.line ? { line: doc.line.map((entry) => ({ ...entry })) } : {}) };
}
