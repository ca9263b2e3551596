import type { ClientSession } from 'mongodb';
import type { Observable } from 'rxjs';
import type { LockLostError } from '../errors/lock-lost.error';

/**
 * A held lock: one or several keys, acquired together, released together.
 *
 * @example
 * const handle = await locks.acquire('invoices:2024-06');
 * try {
 *   await invoices.close('2024-06', { fence: handle.fence, signal: handle.signal });
 * } finally {
 *   await handle.release();
 * }
 */
export interface LockHandle {
  /** The first key (in sorted order); the only one for a single-key lock. */
  readonly key: string;
  /** All keys, sorted. */
  readonly keys: readonly string[];
  /** Fencing token of `key`: pass it to the protected resource so it can reject stale holders. */
  readonly fence: bigint;
  /** Fencing token of every key. */
  readonly fences: ReadonlyMap<string, bigint>;
  /**
   * When `signal` aborts unless renewed: a little before the server's lease end (counted from
   * before the request was sent, less a margin), so the holder knows before another can take it.
   */
  readonly expiresAt: Date;
  /** Aborts, with a {@link LockLostError} as reason, when the lease is lost. */
  readonly signal: AbortSignal;
  /** Emits once when the lease is lost, then completes; completes without emitting on release. */
  readonly lost$: Observable<LockLostError>;
  readonly released: boolean;
  readonly lost: boolean;
  /**
   * Renews now: the lease then ends no sooner than `ttlMs` (default: the acquisition's) from
   * now. Rejects with {@link LockLostError} if lost, and with `MongoLockError` once released (or
   * being released), or inside the lock's transaction (renewed in full when it began).
   */
  extend(ttlMs?: number): Promise<void>;
  /**
   * Gives the lock back (owner-checked); after a success, later calls resolve too. Rejects at
   * once with {@link LockLostError} if the lease was lost (a key of several found lost too), and
   * with the store's error if MongoDB did not confirm (`LockStoreUnavailableError` when it did
   * not answer, else a `MongoLockError` whose `cause` is its refusal): the release is then
   * retried in the background until the lease would end (later calls reject with the same error
   * until it is answered), and `signal` still aborts at the lease end unless it is answered first.
   * Passing it to a caller here, or keeping it a turn for one (`localHandOff`), needs no write.
   * Inside the lock's own transaction it rejects with `MongoLockError`: its end releases it.
   */
  release(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
  /** With `transaction` (`withLock`, `@Locked`): the session to pass to every protected command. */
  readonly session?: ClientSession | undefined;
  /** `'exclusive'`, or `'shared'` (a shared holder, or a semaphore's permit holder). */
  readonly mode: 'exclusive' | 'shared';
  /** A semaphore's permits, and how many of them this handle holds; `undefined` for a lock. */
  readonly permits: { of: number; held: number } | undefined;
}
