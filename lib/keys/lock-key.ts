import { InvalidLockKeyError } from '../errors/invalid-lock-key.error';

/**
 * Longest accepted key, in UTF-8 bytes: the key is the lock document's indexed `_id`, and short
 * keys keep index entries and change events small.
 */
export const MAX_LOCK_KEY_BYTES = 512;

/**
 * Most keys one call takes: they are taken one after another, each a round trip, within one
 * bound (a call past it fails as if MongoDB were slow and gives back what it took).
 */
export const MAX_LOCK_KEYS = 100;

const QUOTED_KEY_CHARS = 64;

/** Quotes a key for a message, shortened so that a huge key cannot flood a log line. */
export function quoteLockKey(key: string): string {
  const shown = key.length > QUOTED_KEY_CHARS ? `${key.slice(0, QUOTED_KEY_CHARS)}…` : key;
  return JSON.stringify(shown);
}

/**
 * A lone surrogate: BSON stores UTF-8, where it becomes U+FFFD, so the stored key would differ
 * from the one given and distinct keys would share one lock.
 */
export const LONE_SURROGATE =
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A value other than a string as a message shows it: by its kind (`null`, `an array`, `a number`). */
export function describeNonString(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/**
 * Checks one lock key: a non-empty, well-formed string of at most {@link MAX_LOCK_KEY_BYTES}
 * UTF-8 bytes, without NUL. Anything else is rejected, so a key never becomes a query operator.
 */
export function validateLockKey(key: unknown): string {
  if (typeof key !== 'string') {
    throw new InvalidLockKeyError(`Lock key must be a string, got ${describeNonString(key)}`);
  }
  if (key.length === 0) {
    throw new InvalidLockKeyError('Lock key must not be empty');
  }
  if (key.includes('\0')) {
    throw new InvalidLockKeyError(`Lock key ${quoteLockKey(key)} contains a NUL character`);
  }
  if (LONE_SURROGATE.test(key)) {
    throw new InvalidLockKeyError(
      `Lock key ${quoteLockKey(key)} is not well-formed Unicode (it has a lone surrogate)`,
    );
  }
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > MAX_LOCK_KEY_BYTES) {
    throw new InvalidLockKeyError(
      `Lock key ${quoteLockKey(key)} is ${bytes} bytes long; the limit is ${MAX_LOCK_KEY_BYTES} UTF-8 bytes`,
    );
  }
  return key;
}

/**
 * Validates one key or a list, deduplicated and sorted by code unit: every process takes keys in
 * one global order, so multi-key acquisitions cannot deadlock each other.
 */
export function normalizeLockKeys(keys: unknown): string[] {
  if (!Array.isArray(keys)) return [validateLockKey(keys)];
  if (keys.length === 0) {
    throw new InvalidLockKeyError('At least one lock key is required, got an empty list');
  }
  // `Array.from`, not `map`: a hole of a sparse array is checked too.
  const unique = new Set(Array.from(keys as unknown[], (key) => validateLockKey(key)));
  if (unique.size > MAX_LOCK_KEYS) {
    throw new InvalidLockKeyError(
      `A lock takes at most ${MAX_LOCK_KEYS} keys, got ${unique.size} (take one coarser key that ` +
        'covers them instead)',
    );
  }
  return [...unique].sort();
}
