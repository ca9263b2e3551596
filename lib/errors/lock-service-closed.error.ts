import { MongoLockError } from './mongo-lock.error';

/**
 * The `LockService` is shutting down or closed: it takes no new locks. Work already holding
 * a lock keeps it until the shutdown grace period ends. Over HTTP it is
 * `503 Service Unavailable`, so a load balancer retries on another instance.
 *
 * @example
 * if (error instanceof LockServiceClosedError) return; // the app is stopping
 */
export class LockServiceClosedError extends MongoLockError {
  override get name(): string {
    return 'LockServiceClosedError';
  }
}
