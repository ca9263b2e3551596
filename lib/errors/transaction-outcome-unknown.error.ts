import { LockStoreUnavailableError } from './lock-store-unavailable.error';

/**
 * The commit of a locked transaction (`withLock(…, { transaction: true })`) could not be
 * confirmed: MongoDB may or may not have applied it (the driver's error, labelled
 * `UnknownTransactionCommitResult`, is the `cause`). The driver already retried the commit.
 * Check the data before running the work again. The lock is released either way. Over HTTP it
 * is `503 Service Unavailable`, as for `LockStoreUnavailableError`.
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
