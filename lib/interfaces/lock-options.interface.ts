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
   * The `lock.template` attribute of the OpenTelemetry metrics and spans, at most 200
   * characters: the kind of lock (`'invoices:{month}'`), never a key (`'invoices:2024-06'`),
   * as each value is a new time series. Default `'(direct)'`; `@Locked` uses its key template(s).
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
   * Runs the function in a MongoDB transaction on a session the library starts
   * (`handle.session`); it commits only if a write to each lock in it finds the key still ours,
   * so work under a lost lease never commits. The lock is released after the commit or final
   * abort. Like the driver's `withTransaction`, it reruns the function after a transient error.
   * Needs a replica set or sharded cluster; on a standalone server it fails before running it.
   */
  transaction?: boolean | { maxCommitTimeMS?: number };
}

/** Options of `LockService.forceRelease`. */
export interface ForceReleaseOptions {
  /**
   * Frees only these holders, by their fences as `inspect()` or `list()` reports them
   * (`LockHolderState.fence`; a handle's `fence` names its entry too): the holders an operator
   * was shown. Decided in the command's one write: a holder that took the key since, or a
   * waiter, stays. At most 1000 fences, each a bigint from `0n` (none: nobody is freed).
   * Default: every holder.
   */
  fences?: readonly bigint[];
}
