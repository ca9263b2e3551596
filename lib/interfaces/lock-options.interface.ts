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
}
