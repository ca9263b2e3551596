import type { MongoClient } from 'mongodb';

/** How a held lock is renewed while its holder works. */
export interface LockRenewalOptions {
  /**
   * Renew while held. In the module's `renewal`: default `true` for `withLock` and `@Locked`,
   * `false` for `acquire`. In a call's `renew` object: default `true` (the object asks to renew).
   */
  enabled?: boolean;
  /**
   * Renew when about this fraction of the lease has passed (0 < ratio < 1): the renewal is sent
   * `(1 - ratio) × ttlMs` before the lease's local deadline. Default `1/3`.
   */
  intervalRatio?: number;
}

/** Options of `MongoLockModule.forRoot()` / `forRootAsync()`. */
export interface MongoLockModuleOptions {
  /** Connection string. Give `uri` or `client`, not both. */
  uri?: string;
  /** An existing `MongoClient`, connected or not. The module never closes it. */
  client?: MongoClient;
  /** Database of the lock collection. Default: the one in `uri`, else `'test'` (as the driver). */
  dbName?: string;
  /** Lock collection. Default `'locks'`. */
  collectionName?: string;
  /** Lease of a lock when the caller gives no `ttlMs`. Default 30 000 ms. */
  defaultTtlMs?: number;
  /** How long `acquire` waits when the caller gives no `timeoutMs`. Default 10 000 ms. */
  defaultTimeoutMs?: number;
  /** Renewal defaults. */
  renewal?: LockRenewalOptions;
  /** Longest total hold of one acquisition with renewal (stops a stuck method). Default 10 min. */
  maxHoldMs?: number;
  /**
   * Identifies this instance in lock entries (`h`): 1 to 200 characters, not starting with `$`,
   * `*`, `!` or `?`, unique per process. Default `host:pid:random`.
   */
  holderId?: string;
  /** How long a released lock document is kept before the TTL index deletes it. Default 24 h. */
  idleRetentionMs?: number;
  /** Create the lock collection's indexes at start-up. Default `true`. */
  ensureIndexes?: boolean;
  /**
   * The lock protocol: `'v2'`, the default and only one (each key's line, on collection
   * `<collectionName>_line`; docs/engine-v2.md). 0.1's `'v1'` is refused (docs/upgrading.md).
   */
  engine?: 'v2';
  /** `'auto'` (default): wait on a change stream where available, else poll. `'off'`: poll. */
  changeStreams?: 'auto' | 'off';
  /**
   * Pass a released exclusive, unscoped lock straight to a waiting caller of the same process,
   * without a write (runs of up to 50 ms or 16 holders; docs/engine-v2.md). `false`: every
   * hand-off goes through the key's line (more commands; BENCHMARKS.md). Default `true`.
   */
  localHandOff?: boolean;
  /** First poll interval without change streams (backoff doubles it, jittered). Default 50 ms. */
  pollIntervalMs?: number;
  /** Cap of the polling backoff. Default 1 000 ms (or `pollIntervalMs`, if larger). */
  maxPollIntervalMs?: number;
  /**
   * How often `waitForRelease` looks at the key anyway while on a change stream, for what no
   * event announces (releases and lease expiry wake it without this). Default 5 000 ms.
   */
  safetyPollIntervalMs?: number;
  /**
   * Longest time for one lock command, server selection included, before it fails with
   * `LockStoreUnavailableError` (outcome unknown; anything it may have taken is given back).
   * `acquire` settles within `timeoutMs` plus 1 s, or plus this if shorter. Default 5 000 ms.
   */
  operationTimeoutMs?: number;
  /**
   * On shutdown, how long running locked work may finish, its locks renewed, before its
   * holders are told of the loss and the locks released (a locked HTTP handler still running
   * is answered 503). `close()` returns at most 2 s later, plus a leader's resignation and a start
   * still under way (docs/outages-and-shutdown.md). Default 10 000 ms.
   */
  shutdownGraceMs?: number;
  /**
   * `false` makes `@Locked` a pass-through (methods and handlers run unlocked: no key built,
   * nothing sent to MongoDB), and `LockService` skips connecting at start-up (it connects
   * lazily if called). For single-instance local runs and tests. Default `true`.
   */
  enabled?: boolean;
}
