import { MongoLockError } from './mongo-lock.error';

/**
 * A module or acquisition option is out of range. The message names the option, the
 * accepted range and the value given.
 *
 * @example
 * new LockService({ uri, defaultTtlMs: -5 });
 * // InvalidLockOptionsError: defaultTtlMs must be an integer from 1000 to 2147483647, got -5
 */
export class InvalidLockOptionsError extends MongoLockError {
  /** Name of the offending option. */
  readonly option: string;

  constructor(message: string, details: { option: string; cause?: unknown }) {
    super(message, details);
    this.option = details.option;
  }

  override get name(): string {
    return 'InvalidLockOptionsError';
  }
}
