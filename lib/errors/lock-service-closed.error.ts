import { MongoLockError } from './mongo-lock.error';

/**
 * The `LockService` is closing or closed and takes no new locks; held locks last until the
 * shutdown grace period ends. 503 over HTTP, so a load balancer retries another instance.
 *
 * @example
 * if (error instanceof LockServiceClosedError) return; // the app is stopping
 */
export class LockServiceClosedError extends MongoLockError {
  override get name(): string {
    return 'LockServiceClosedError';
  }
}
