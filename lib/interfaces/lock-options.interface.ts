import type { LockRenewalOptions } from './mongo-lock-options.interface';

/** Options of one acquisition (`acquire`, `tryAcquire`, `withLock`, `acquire$`, `@Locked`). */
export interface AcquireOptions {
  /** Lease length, decided by the server clock. Default: module `defaultTtlMs`. */
  ttlMs?: number;
  /** How long to wait for a held lock. `0` = one attempt. Default: module `defaultTimeoutMs`. */
  timeoutMs?: number;
  /** Aborting it cancels the wait; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Renew while held: `true`, `false`, or renewal options. */
  renew?: boolean | LockRenewalOptions;
  /**
   * The `lock.template` attribute of this acquisition's metrics and spans (OpenTelemetry).
   * Name the kind of lock, never the key itself: `'invoices:{month}'`, not `'invoices:2024-06'`
   * (every distinct value is a new time series). Default `'(direct)'`; `@Locked` uses its key
   * template(s) as written. At most 200 characters.
   */
  metricsLabel?: string;
  /**
   * Tags the acquisition with an owner scope (a user session, a tenant): `releaseScope(scope)`
   * releases every lock of that scope, whichever instance holds it. 1 to 200 characters.
   */
  scope?: string;
  /**
   * `'exclusive'` (default): nobody else holds the key. `'shared'`: shared holders coexist; an
   * exclusive holder excludes them all, and a waiting exclusive holder is not overtaken by new
   * shared ones. Every holder has its own lease. Not with `permits`.
   */
  mode?: 'exclusive' | 'shared';
  /**
   * The key is a semaphore with this many permits (1 to 1000): at most that many, counted by
   * `weight`, hold it at once. Every caller of one key must give the same number; a key in use
   * as a lock, or as a semaphore of other permits, is refused with `InvalidLockOptionsError`.
   */
  permits?: number;
  /** Permits this holder takes, all or nothing (default 1; at most `permits`). */
  weight?: number;
}

/** Options of `withLock` (and `@Locked`): an acquisition's, plus the transaction. */
export interface WithLockOptions extends AcquireOptions {
  /**
   * Runs the function inside a MongoDB transaction on a session the library starts
   * (`handle.session`). It commits only if every key is still ours at commit time (checked by
   * a write to each lock inside the transaction), so work done under a lost lease is never
   * committed; the lock is released after the commit or the final abort. Like the driver's
   * `withTransaction`, the function runs again after a transient error. Needs a replica set
   * or a sharded cluster; on a standalone server it fails before the function runs.
   */
  transaction?: boolean | { maxCommitTimeMS?: number };
}
