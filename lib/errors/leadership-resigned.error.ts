import { MongoLockError } from './mongo-lock.error';

/**
 * A `campaign()` still waiting when its instance resigned the leadership (`resign()`), or a
 * term that ended before the campaign could be given it; also a resigned term's `signal.reason`.
 *
 * @example
 * if (error instanceof LeadershipResignedError) return; // this instance stepped down
 */
export class LeadershipResignedError extends MongoLockError {
  constructor(readonly leadership: string) {
    super(`Leadership ${JSON.stringify(leadership)}: resigned`);
  }

  override get name(): string {
    return 'LeadershipResignedError';
  }
}
