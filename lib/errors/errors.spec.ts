import {
  InvalidLockKeyError,
  InvalidLockOptionsError,
  LockLostError,
  LockNotAcquiredError,
  LockStoreUnavailableError,
  MongoLockError,
  TransactionOutcomeUnknownError,
} from '.';

describe('error classes', () => {
  it.each([
    ['MongoLockError', new MongoLockError('m')],
    ['LockNotAcquiredError', new LockNotAcquiredError('m', { keys: ['a'] })],
    ['LockLostError', new LockLostError('m', { key: 'a' })],
    ['InvalidLockKeyError', new InvalidLockKeyError('m')],
    ['InvalidLockOptionsError', new InvalidLockOptionsError('m', { option: 'ttlMs' })],
    ['TransactionOutcomeUnknownError', new TransactionOutcomeUnknownError('m')],
  ])('%s has its name, is a MongoLockError and an Error', (name, error) => {
    expect(error.name).toBe(name);
    expect(error).toBeInstanceOf(MongoLockError);
    expect(error).toBeInstanceOf(Error);
    expect(String(error)).toBe(`${name}: m`);
    expect(error.stack).toContain(name);
  });

  it('reports an unconfirmed commit as MongoDB being unavailable (HTTP 503)', () => {
    expect(new TransactionOutcomeUnknownError('m')).toBeInstanceOf(LockStoreUnavailableError);
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
