import { MongoClient } from 'mongodb';
import type { Timestamp } from 'mongodb';
import type { LockState } from '../interfaces/lock-state.interface';
import type { ResolvedLockModuleOptions } from '../options';
import { attemptAcquire } from './acquire-attempt';
import type { AcquireAttemptOutcome } from './acquire-attempt';
import { ensureLockIndexes } from './ensure-indexes';
import { inspectLock, probeLock } from './inspect-lock';
import { openLockCollection } from './lock-collection';
import { openLockChangeStream } from './lock-change-stream';
import type { OpenLockChangeStreamOptions } from './lock-change-stream';
import type { LockChangeStream, LockCollection } from './lock-document';
import { releaseAllByHolder } from './release-all-by-holder';
import { releaseLease } from './release-lease';
import type { ReleaseLeaseOutcome } from './release-lease';
import { renewLease } from './renew-lease';
import type { RenewLeaseOutcome } from './renew-lease';

/** A key's liveness with the timing a waiter needs. */
export interface KeyLeaseProbe {
  held: boolean;
  remainingMs: number;
  sentAt: number;
  operationTime: Timestamp | undefined;
}

/** The store's functions bound to one connected client and lock collection. */
export class LockStore {
  private readonly collection: LockCollection;

  /**
   * Connects (creating the client from `uri` when none was given) and ensures the indexes
   * if asked. A client created here is closed again if any of that fails.
   */
  static async open(options: ResolvedLockModuleOptions): Promise<LockStore> {
    const ownsClient = options.client === undefined;
    const client = options.client ?? new MongoClient(options.uri as string);
    try {
      if (ownsClient) await client.connect();
      const store = new LockStore(client, ownsClient, options);
      if (options.ensureIndexes) await store.ensureIndexes();
      return store;
    } catch (error) {
      if (ownsClient) await client.close().catch(() => undefined);
      throw error;
    }
  }

  constructor(
    readonly client: MongoClient,
    /** Whether the service created the client (and so must close it). */
    readonly ownsClient: boolean,
    private readonly options: ResolvedLockModuleOptions,
  ) {
    this.collection = openLockCollection(client, options.dbName, options.collectionName);
  }

  /** Closes the client only if the store created it; a client the user gave stays open. */
  closeOwnedClient(): Promise<void> {
    return this.ownsClient ? this.client.close() : Promise.resolve();
  }

  ensureIndexes(): Promise<void> {
    return ensureLockIndexes(this.collection);
  }

  attempt(key: string, owner: string, ttlMs: number): Promise<AcquireAttemptOutcome> {
    return attemptAcquire(this.collection, this.client, {
      key,
      owner,
      holder: this.options.holderId,
      ttlMs,
    });
  }

  renew(key: string, owner: string, ttlMs: number): Promise<RenewLeaseOutcome> {
    return renewLease(this.collection, { key, owner, ttlMs });
  }

  release(key: string, owner: string): Promise<ReleaseLeaseOutcome> {
    return releaseLease(this.collection, {
      key,
      owner,
      idleRetentionMs: this.options.idleRetentionMs,
    });
  }

  releaseAllByHolder(): Promise<number> {
    return releaseAllByHolder(this.collection, {
      holder: this.options.holderId,
      idleRetentionMs: this.options.idleRetentionMs,
    });
  }

  inspect(key: string): Promise<LockState | null> {
    return inspectLock(this.collection, key);
  }

  async probe(key: string): Promise<KeyLeaseProbe> {
    const { state, sentAt, operationTime } = await probeLock(this.collection, this.client, key);
    return {
      held: state?.held ?? false,
      remainingMs: state?.remainingMs ?? 0,
      sentAt,
      operationTime,
    };
  }

  openChangeStream(options: OpenLockChangeStreamOptions): LockChangeStream {
    return openLockChangeStream(this.collection, options);
  }
}
