import { InvalidLockKeyError } from '../errors';
import { MAX_LOCK_KEY_BYTES, MAX_LOCK_KEYS, normalizeLockKeys, validateLockKey } from './lock-key';

describe('validateLockKey', () => {
  it('accepts an ordinary key unchanged', () => {
    expect(validateLockKey('orders:42')).toBe('orders:42');
  });

  it.each([
    ['a number', 42],
    ['null', null],
    ['undefined', undefined],
    ['an operator object', { $ne: null }],
    ['an array', ['a']],
  ])('rejects %s', (_label, key) => {
    expect(() => validateLockKey(key)).toThrow(InvalidLockKeyError);
  });

  it('rejects the empty string', () => {
    expect(() => validateLockKey('')).toThrow(/must not be empty/);
  });

  it('rejects a NUL character and names the key', () => {
    expect(() => validateLockKey('a\0b')).toThrow(/"a\\u0000b" contains a NUL/);
  });

  it.each([
    ['a lone high surrogate', 'x\ud800y'],
    ['a lone high surrogate at the end', 'x\udbff'],
    ['a lone low surrogate', '\udc00x'],
    ['two high surrogates', '\ud800\ud800\udc00'],
  ])('rejects %s, which BSON would store as U+FFFD', (_label, key) => {
    expect(() => validateLockKey(key)).toThrow(/not well-formed Unicode/);
  });

  it('accepts paired surrogates (characters outside the BMP)', () => {
    expect(validateLockKey('emoji:\ud83d\udd12')).toBe('emoji:🔒');
  });

  it('counts UTF-8 bytes, not characters', () => {
    const atLimit = 'é'.repeat(MAX_LOCK_KEY_BYTES / 2);
    expect(validateLockKey(atLimit)).toBe(atLimit);
    expect(() => validateLockKey(`${atLimit}x`)).toThrow(/513 bytes long; the limit is 512/);
  });

  it('truncates a long key in the message', () => {
    const error = captureError(() => validateLockKey('k'.repeat(10_000)));
    expect(error.message.length).toBeLessThan(200);
    expect(error.message).toContain('…');
  });
});

describe('normalizeLockKeys', () => {
  it('wraps a single key', () => {
    expect(normalizeLockKeys('a')).toEqual(['a']);
  });

  it('deduplicates and sorts by code unit', () => {
    expect(normalizeLockKeys(['b', 'a', 'B', 'b'])).toEqual(['B', 'a', 'b']);
  });

  it('rejects an empty list', () => {
    expect(() => normalizeLockKeys([])).toThrow(InvalidLockKeyError);
  });

  it(`takes at most ${MAX_LOCK_KEYS} distinct keys (duplicates count once)`, () => {
    const keys = Array.from({ length: MAX_LOCK_KEYS }, (_, i) => `k${i}`);
    expect(normalizeLockKeys([...keys, ...keys])).toHaveLength(MAX_LOCK_KEYS);
    const error = captureError(() => normalizeLockKeys([...keys, 'one more']));
    expect(error).toBeInstanceOf(InvalidLockKeyError);
    expect(error.message).toBe(
      `A lock takes at most ${MAX_LOCK_KEYS} keys, got ${MAX_LOCK_KEYS + 1} (take one coarser key that ` +
        'covers them instead)',
    );
  });

  it('rejects a list with one bad key', () => {
    expect(() => normalizeLockKeys(['a', { $gt: '' }])).toThrow(/must be a string, got an object/);
  });

  it('rejects a hole in a sparse list (from JavaScript)', () => {
    // eslint-disable-next-line no-sparse-arrays -- the input under test
    expect(() => normalizeLockKeys(['b', , 'a'])).toThrow(/must be a string, got undefined/);
    expect(() => normalizeLockKeys(new Array(1))).toThrow(/must be a string, got undefined/);
  });
});

function captureError(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a throw');
}
