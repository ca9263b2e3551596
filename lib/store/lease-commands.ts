import type { ClientSession } from 'mongodb';
import type { LockHolderState, LockState } from '../interfaces/lock-state.interface';
import type { AcquireAttemptOutcome, AcquireAttemptRequest } from './acquire-attempt';
import { attemptAcquire } from './acquire-attempt';
import { ensureLockIndexes } from './ensure-indexes';
import { forceRelease } from './force-release';
import { listLocks } from './list-locks';
import type { ListLocksQuery } from './list-locks';
import { inspectLock, probeLock } from './inspect-lock';
import type { LockProbe } from './inspect-lock';
import { openLockChangeStream } from './lock-change-stream';
import type { OpenLockChangeStreamOptions } from './lock-change-stream';
import type { LockChangeStream, LockCollection, SessionSource } from './lock-document';
import {
  confirmEntryIn,
  keepReservation,
  releaseEntry,
  releaseScopeEntries,
  renewEntry,
  withdrawReservation,
} from './holder-entries';
import { isEntryOwner } from './lock-modes';
import { releaseLease } from './release-lease';
import { releaseScope } from './release-scope';
import type { ReleaseOptions, ReleaseResult } from './release-lease';
import { renewLease } from './renew-lease';
import type { RenewLeaseOutcome, RenewLeaseRequest } from './renew-lease';

/**
 * The single-round-trip lease commands of one place where leases live: the lock collection
 * (one document per key), or a lock field in the application's own documents. `LockStore`
 * bounds, tracks and cleans up after them the same way for both.
 */
export interface LeaseCommands {
  attempt(request: AcquireAttemptRequest): Promise<AcquireAttemptOutcome>;
  renew(request: RenewLeaseRequest): Promise<RenewLeaseOutcome>;
  /**
   * `fence`: the released lease's, when known (a retry then recognises that lease's release
   * only). `successor`: where supported (the lock collection), the release may pass the lock
   * to it.
   */
  release(key: string, owner: string, options?: ReleaseOptions): Promise<ReleaseResult>;
  inspect(key: string): Promise<LockState | null>;
  probe(key: string): Promise<LockProbe>;
  openChangeStream(options: OpenLockChangeStreamOptions): LockChangeStream;
  ensureIndexes(): Promise<void>;
  /** A waiting process's reservation goes (see `attemptPipeline`); only where attempts reserve. */
  withdraw?(key: string, reservation: string, exceptGrant?: string): Promise<void>;
  /** A parked waiting process renews its reservation; its remaining lease, if it was live. */
  keepPlace?(key: string, reservation: string): Promise<number | undefined>;
  /** A page of keys in key order (see `listLocks`); only where keys share one collection. */
  list?(query: ListLocksQuery): Promise<LockState[]>;
  /** Frees every live lease of a key, whoever holds it (see `forceRelease`). */
  forceRelease?(key: string): Promise<LockHolderState[]>;
  /** Frees every live lease of an owner scope; only where leases can carry one. */
  releaseScope?(scope: string): Promise<number>;
  /**
   * Inside a transaction: true if `owner` still holds a live lease on `key`, proven by a write
   * to the lock, so that a takeover before the commit makes the commit fail.
   */
  confirmHeldIn?(key: string, owner: string, session: ClientSession): Promise<boolean>;
}

/** The lock collection's commands (see ARCHITECTURE.md §3). */
export function lockCollectionCommands(
  collection: LockCollection,
  sessions: SessionSource,
  idleRetentionMs: number,
): LeaseCommands {
  return {
    attempt: (request) => attemptAcquire(collection, sessions, request),
    renew: (request) =>
      isEntryOwner(request.owner)
        ? renewEntry(collection, request.key, request.owner, request.ttlMs)
        : renewLease(collection, request),
    release: async (key, owner, options) =>
      isEntryOwner(owner)
        ? { outcome: await releaseEntry(collection, key, owner, idleRetentionMs) }
        : releaseLease(collection, { key, owner, idleRetentionMs, ...options }),
    inspect: (key) => inspectLock(collection, key),
    probe: (key) => probeLock(collection, sessions, key),
    openChangeStream: (options) => openLockChangeStream(collection, sessions, options),
    ensureIndexes: () => ensureLockIndexes(collection),
    withdraw: (key, reservation, exceptGrant) =>
      withdrawReservation(collection, key, reservation, idleRetentionMs, exceptGrant),
    keepPlace: (key, reservation) => keepReservation(collection, key, reservation),
    list: (query) => listLocks(collection, query),
    forceRelease: (key) => forceRelease(collection, key, idleRetentionMs),
    releaseScope: async (scope) =>
      (await releaseScope(collection, scope, idleRetentionMs)) +
      (await releaseScopeEntries(collection, scope, idleRetentionMs)),
    confirmHeldIn: async (key, owner, session) => {
      if (isEntryOwner(owner)) return confirmEntryIn(collection, key, owner, session);
      const result = await collection.updateOne(
        { _id: key, owner, $expr: { $gt: ['$expiresAt', '$$NOW'] } },
        [{ $set: { confirmedAt: '$$NOW' } }],
        { session },
      );
      return result.matchedCount === 1;
    },
  };
}
