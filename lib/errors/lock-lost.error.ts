import { MongoLockError } from './mongo-lock.error';

/**
 * The lease ended before its holder released it (renewal failed, local deadline passed,
 * `maxHoldMs` exceeded, or another holder took the key after expiry). Work done under the lock
 * since then was not protected.
 *
 * @example
 * const handle = await locks.acquire('report');
 * handle.signal.addEventListener('abort', () => job.cancel(handle.signal.reason));
 */
export class LockLostError extends MongoLockError {
  /** The key whose lease was lost. */
  readonly key: string;

  constructor(message: string, details: { key: string; cause?: unknown }) {
    super(message, details);
    this.key = details.key;
  }

  override get name(): string {
    return 'LockLostError';
  }
}
