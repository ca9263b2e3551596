import { InvalidLockOptionsError } from '../../lib/errors';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

// docs/options.md: invalid options fail with InvalidLockOptionsError; timeoutMs accepts 0 to
// 2147483647, and only an option left `undefined` counts as not given. tryAcquire refused
// nothing here: it turned `timeoutMs: null` into 0 and took the lock, which acquire refuses.
describe('tryAcquire checks timeoutMs as acquire does', () => {
  const kit = LockTestKit.forSuite();

  it('refuses timeoutMs: null, and writes nothing', async () => {
    const locks = await kit.service();
    const options = { timeoutMs: null } as never;
    await expect(locks.acquire('null-timeout', options)).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    const tried = await locks.tryAcquire('null-timeout', options).then(
      async (handle) => (await handle?.release(), handle),
      (error: unknown) => error,
    );
    expect(tried).toBeInstanceOf(InvalidLockOptionsError);
    expect(await kit.rawLocks()).toEqual([]);
  });
});
