import { MongoLockError } from './mongo-lock.error';

/**
 * A version-checked write found the document locked by a live lease: it waits for nobody
 * and writes nothing. 423 over HTTP, with `Retry-After`.
 *
 * @example
 * catch (error) {
 *   if (error instanceof DocumentLockedError) setTimeout(retry, error.retryAfterMs);
 * }
 */
export class DocumentLockedError extends MongoLockError {
  readonly id: unknown;
  /** The lock's remaining lease by the server clock. */
  readonly retryAfterMs: number;
  /** Id of the `LockService` instance that holds the lock. */
  readonly holderId: string | undefined;

  constructor(message: string, details: { id: unknown; retryAfterMs: number; holderId?: string }) {
    super(message);
    this.id = details.id;
    this.retryAfterMs = details.retryAfterMs;
    this.holderId = details.holderId;
  }

  override get name(): string {
    return 'DocumentLockedError';
  }
}
