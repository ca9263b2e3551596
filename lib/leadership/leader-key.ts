import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { LONE_SURROGATE, MAX_LOCK_KEY_BYTES, validateLockKey } from '../keys/lock-key';

/** A leadership's lock key: this prefix plus its name (the board shows such keys as leaders). */
export const LEADER_KEY_PREFIX = 'nestjs-mongo-lock:leader:';

/** The lock key that leadership `name` holds. Rejects what could not be a lock key. */
export function leaderKey(name: unknown): string {
  const refuse = (message: string) => new InvalidLockOptionsError(message, { option: 'name' });
  if (typeof name !== 'string' || name.length === 0) {
    throw refuse('A leadership name must be a non-empty string');
  }
  // Checked on the name, as every other rule is, not later on the key it makes.
  if (name.includes('\0') || LONE_SURROGATE.test(name)) {
    throw refuse('A leadership name must be well-formed Unicode without NUL characters');
  }
  const limit = MAX_LOCK_KEY_BYTES - Buffer.byteLength(LEADER_KEY_PREFIX);
  if (Buffer.byteLength(name) > limit) {
    throw refuse(`A leadership name is at most ${limit} UTF-8 bytes`);
  }
  return validateLockKey(LEADER_KEY_PREFIX + name);
}

/** The leadership name of a lock key, or `undefined` when the key is no leadership's. */
export function leaderNameOf(key: string): string | undefined {
  // The prefix alone names no leadership (a leadership's name is never empty).
  const name = key.startsWith(LEADER_KEY_PREFIX) ? key.slice(LEADER_KEY_PREFIX.length) : '';
  return name === '' ? undefined : name;
}
