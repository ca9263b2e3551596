// A reply on its way at a wait's deadline: a `timeoutMs` shorter than a round trip does no worse
// than none (the first join's reply is waited for, as a try's is).
import { LockNotAcquiredError, LockStoreUnavailableError } from '../../lib/errors';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { LockTestKit, eventually, settle } from './lock-test-kit';

jest.setTimeout(30_000);

describeWithFailPoints('a reply on its way at the deadline', () => {
  const kit = LockTestKit.forSuite();
  const { delayNext, appClient } = faultTools(kit);

  it('a free key is acquired with a timeoutMs shorter than its join takes to answer', async () => {
    const appName = 'short-timeout-free';
    const locks = await kit.service({ client: await appClient(appName) });
    for (const [i, timeoutMs] of [1, 2, 10, 29, 1, 2, 10, 29].entries()) {
      // The join reaches MongoDB 50 ms late: its reply comes after the deadline, every time.
      await delayNext(appName, 'findAndModify', 50);
      const handle = await locks.acquire(`short:free:${i}`, { timeoutMs });
      await handle.release();
    }
  });

  it('a held key with a late reply to its join is busy (LockNotAcquiredError), and left', async () => {
    const appName = 'short-timeout-held';
    const holder = await kit.service();
    const held = await holder.acquire('short:held', { ttlMs: 30_000 });
    const locks = await kit.service({ client: await appClient(appName) });
    await delayNext(appName, 'findAndModify', 50);

    const failed = await settle(locks.acquire('short:held', { timeoutMs: 1 }));

    expect(failed).toBeInstanceOf(LockNotAcquiredError);
    expect(failed).not.toBeInstanceOf(LockStoreUnavailableError);
    await eventually(async () => (await holder.inspect('short:held'))?.waiting === 0);
    await held.release();
  });
});
