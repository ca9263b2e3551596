import type { MongoClient } from 'mongodb';

/** How a held lock is renewed while its holder works. */
export interface LockRenewalOptions {
  /** Renew automatically while held. Default: `true` for `withLock` and `@Locked`, `false` for `acquire`. */
  enabled?: boolean;
  /** Renew when this fraction of the lease has passed (0 < ratio < 1). Default `1/3`. */
  intervalRatio?: number;
}

/** Options of `MongoLockModule.forRoot()` / `forRootAsync()`. */
export interface MongoLockModuleOptions {
  /** Connection string. Give `uri` or `client`, not both. */
  uri?: string;
  /** An existing, connected or not, `MongoClient`. The module never closes a client it did not create. */
  client?: MongoClient;
  /** Database of the lock collection. Default: the database in `uri`, else `'test'` (as the driver). */
  dbName?: string;
  /** Lock collection. Default `'locks'`. */
  collectionName?: string;
  /** Lease of a lock when the caller gives no `ttlMs`. Default 30 000 ms. */
  defaultTtlMs?: number;
  /** How long `acquire` waits when the caller gives no `timeoutMs`. Default 10 000 ms. */
  defaultTimeoutMs?: number;
  /** Renewal defaults. */
  renewal?: LockRenewalOptions;
  /** Longest total hold of one acquisition with renewal, so a stuck method cannot hold for ever. Default 10 minutes. */
  maxHoldMs?: number;
  /** Identifies this instance in lock documents (`holder`). Default `host:pid:random`. */
  holderId?: string;
  /** How long a released lock document is kept before the TTL index deletes it. Default 24 h. */
  idleRetentionMs?: number;
  /** Create the lock collection's indexes at start-up. Default `true`. */
  ensureIndexes?: boolean;
  /**
   * The lock protocol: `'v2'`, the only one (ownership by position in each key's line, on the
   * collection `<collectionName>_line`; see docs/engine-v2.md). 0.1's protocol, `'v1'`, is
   * removed and refused (see docs/upgrading.md). Default `'v2'`.
   */
  engine?: 'v2';
  /** `'auto'`: wait on a change stream where the server has them, else poll. `'off'`: always poll. Default `'auto'`. */
  changeStreams?: 'auto' | 'off';
  /**
   * Pass a released lock straight to a caller waiting in the same process: callers of an
   * exclusive, unscoped lock queue behind this process's entry in the key's line and take it
   * over one after another without a write, while it waits and for 50 ms after its first
   * holder began, 16 holders at most (see docs/engine-v2.md). `false`: every hand-off goes
   * through the key's line, as between processes (more commands per section when several
   * callers of one process share a key; see BENCHMARKS.md). Default `true`.
   */
  localHandOff?: boolean;
  /** First poll interval when waiting without change streams (backoff doubles it, with jitter). Default 50 ms. */
  pollIntervalMs?: number;
  /** Cap of the polling backoff. Default 1 000 ms (or `pollIntervalMs`, if larger). */
  maxPollIntervalMs?: number;
  /**
   * While `waitForRelease` waits on a change stream, look at the key again this often anyway,
   * to catch what no event announces. Waking on releases and lease expiry does not depend on
   * it. Default 5 000 ms.
   */
  safetyPollIntervalMs?: number;
  /**
   * The longest one lock command may take, server selection included, before it counts as
   * failed with `LockStoreUnavailableError` (its outcome unknown; anything it may have taken
   * is given back). `acquire` settles within `timeoutMs` plus 1 s, or plus this if shorter.
   * Default 5 000 ms.
   */
  operationTimeoutMs?: number;
  /**
   * On shutdown, how long locked work still running may finish (its locks renewed) before
   * its holders are told of the loss and the locks are released (a locked HTTP handler still
   * running is then answered 503). `close()` returns at most 2 s after it. Default 10 000 ms.
   */
  shutdownGraceMs?: number;
  /**
   * `false` turns `@Locked` into a pass-through: decorated methods and handlers run without
   * any lock (no key is built, nothing is sent to MongoDB), and `LockService` does not connect
   * at start-up (it still connects, lazily, if you call it). For local runs and tests with a
   * single instance. Default `true`.
   */
  enabled?: boolean;
}
