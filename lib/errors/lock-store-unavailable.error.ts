import { MongoLockError } from './mongo-lock.error';

/**
 * MongoDB did not answer in time: the `cause` is the driver's error (network, server selection,
 * a stepping-down primary), or the command outlived the caller's deadline or
 * `operationTimeoutMs`. A write sent meanwhile may have applied; the library gives back
 * anything it may have taken. 503 over HTTP, with `Retry-After`.
 *
 * @example
 * catch (error) {
 *   if (error instanceof LockStoreUnavailableError) scheduleRetry();
 * }
 */
export class LockStoreUnavailableError extends MongoLockError {
  override get name(): string {
    return 'LockStoreUnavailableError';
  }
}
