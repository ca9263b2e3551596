import { MongoLockError } from './mongo-lock.error';

/**
 * A lock key is not a non-empty string of bounded length without NUL characters.
 * Thrown before anything is sent to MongoDB.
 *
 * @example
 * await expect(locks.acquire('')).rejects.toBeInstanceOf(InvalidLockKeyError);
 */
export class InvalidLockKeyError extends MongoLockError {
  override get name(): string {
    return 'InvalidLockKeyError';
  }
}
