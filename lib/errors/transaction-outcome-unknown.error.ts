import { LockStoreUnavailableError } from './lock-store-unavailable.error';

/**
 * The commit of a `withLock(…, { transaction: true })` transaction could not be confirmed, even
 * after the driver's retries: it may or may not have applied (`cause`: the driver's
 * `UnknownTransactionCommitResult` error). Check the data before running the work again. The
 * lock is released either way. 503 over HTTP.
 *
 * @example
 * try {
 *   await locks.withLock(`order:${id}`, (lock) => pay(id, lock.session), { transaction: true });
 * } catch (error) {
 *   if (error instanceof TransactionOutcomeUnknownError) await reconcile(id);
 * }
 */
export class TransactionOutcomeUnknownError extends LockStoreUnavailableError {
  override get name(): string {
    return 'TransactionOutcomeUnknownError';
  }
}
