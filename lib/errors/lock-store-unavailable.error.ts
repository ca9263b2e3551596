import { MongoLockError } from './mongo-lock.error';

/**
 * MongoDB could not be reached, or did not answer, in time: the driver's error (network,
 * server selection, a primary stepping down) is the `cause`, or the command outlived the
 * caller's deadline or `operationTimeoutMs`. Whether a write sent meanwhile took effect is
 * unknown; the library gives back anything it may have taken. Over HTTP it is
 * `503 Service Unavailable` with `Retry-After`.
 *
 * @example
 * try {
 *   await locks.withLock('report', run);
 * } catch (error) {
 *   if (error instanceof LockStoreUnavailableError) scheduleRetry();
 * }
 */
export class LockStoreUnavailableError extends MongoLockError {
  override get name(): string {
    return 'LockStoreUnavailableError';
  }
}
