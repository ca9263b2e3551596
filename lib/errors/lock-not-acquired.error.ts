import { MongoLockError } from './mongo-lock.error';

/**
 * The lock could not be had within the wait (`timeoutMs`), or at once for `timeoutMs: 0`.
 *
 * @example
 * catch (error) {
 *   if (error instanceof LockNotAcquiredError && error.retryAfterMs !== undefined) {
 *     response.setHeader('Retry-After', Math.ceil(error.retryAfterMs / 1000));
 *   }
 * }
 */
export class LockNotAcquiredError extends MongoLockError {
  /** The keys that were asked for, sorted. */
  readonly keys: readonly string[];
  /**
   * Until the lock could be had as far as the holders' leases tell, by the server clock, when
   * known: a mutex's holder's remaining lease; behind shared holders the last one's; for a
   * semaphore, until enough holders have ended to free the permits asked for.
   */
  readonly retryAfterMs: number | undefined;
  /** Id of the `LockService` instance whose lease end that is, when known. */
  readonly holderId: string | undefined;

  constructor(
    message: string,
    details: {
      keys: readonly string[];
      retryAfterMs?: number;
      holderId?: string;
      cause?: unknown;
    },
  ) {
    super(message, details);
    this.keys = details.keys;
    this.retryAfterMs = details.retryAfterMs;
    this.holderId = details.holderId;
  }

  override get name(): string {
    return 'LockNotAcquiredError';
  }
}
