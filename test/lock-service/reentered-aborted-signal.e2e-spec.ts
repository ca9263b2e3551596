import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

// docs/options.md: `signal` "aborting it cancels the wait, and the call rejects with the
// signal's reason"; a withLock given an already aborted signal rejects at once without running.
// The same call made inside a lock that covers its key (re-entered) ignored the signal and ran
// its function: whether work cancelled by its caller (a request whose client left) still ran
// depended on whether an enclosing lock happened to hold the key.
describe('a re-entered withLock given an aborted signal', () => {
  const kit = LockTestKit.forSuite();

  it('rejects with the signal reason, as the same call outside the lock does', async () => {
    const locks = await kit.service();
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    controller.abort(reason);
    await expect(
      locks.withLock('aborted-outside', () => 'ran', { signal: controller.signal }),
    ).rejects.toBe(reason);

    let ran = false;
    const nested = locks.withLock('aborted-inside', () =>
      locks.withLock('aborted-inside', () => (ran = true), { signal: controller.signal }),
    );
    await expect(nested).rejects.toBe(reason);
    expect(ran).toBe(false);
  });
});
