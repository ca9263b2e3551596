import {
  InvalidLockKeyError,
  InvalidLockOptionsError,
  LockLostError,
  LockNotAcquiredError,
  MongoLockError,
} from '.';

describe('error classes', () => {
  it.each([
    ['MongoLockError', new MongoLockError('m')],
    ['LockNotAcquiredError', new LockNotAcquiredError('m', { keys: ['a'] })],
    ['LockLostError', new LockLostError('m', { key: 'a' })],
    ['InvalidLockKeyError', new InvalidLockKeyError('m')],
    ['InvalidLockOptionsError', new InvalidLockOptionsError('m', { option: 'ttlMs' })],
  ])('%s has its name, is a MongoLockError and an Error', (name, error) => {
    expect(error.name).toBe(name);
    expect(error).toBeInstanceOf(MongoLockError);
    expect(error).toBeInstanceOf(Error);
    expect(String(error)).toBe(`${name}: m`);
    expect(error.stack).toContain(name);
  });

  it('carries the cause and the details', () => {
    const cause = new Error('network');
    const notAcquired = new LockNotAcquiredError('m', {
      keys: ['a', 'b'],
      retryAfterMs: 1200,
      holderId: 'host:1:ab',
      cause,
    });
    expect(notAcquired).toMatchObject({
      keys: ['a', 'b'],
      retryAfterMs: 1200,
      holderId: 'host:1:ab',
      cause,
    });
    expect(new LockLostError('m', { key: 'k', cause })).toMatchObject({ key: 'k', cause });
    expect(new LockNotAcquiredError('m', { keys: ['a'] }).retryAfterMs).toBeUndefined();
    expect('cause' in new MongoLockError('m')).toBe(false);
  });
});
