// A reply on its way at a wait's deadline: a `timeoutMs` shorter than a round trip does no worse
// than none (the first join's reply is waited for, as a try's is), and a waiter in line whose
// command MongoDB leaves unanswered fails for that (LockStoreUnavailableError), not as busy.
import { LockNotAcquiredError, LockStoreUnavailableError } from '../../lib/errors';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { LockTestKit, eventually, settle, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

describeWithFailPoints('a reply on its way at the deadline', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, failPointFired, delayNext, appClient } = faultTools(kit);

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

  it('a burst of short waits on a held key: each is busy (LockNotAcquiredError), none blames MongoDB', async () => {
    const appName = 'short-timeout-burst';
    const holder = await kit.service();
    const held = await holder.acquire('short:burst', { ttlMs: 30_000 });
    const locks = await kit.service({ client: await appClient(appName) });
    // Every join answers 40 ms late: 40 callers in call order would take 1.6 s one by one.
    await failPoint('alwaysOn', {
      failCommands: ['findAndModify'],
      appName,
      blockConnection: true,
      blockTimeMS: 40,
    });

    const outcomes = await Promise.all(
      Array.from({ length: 40 }, () => settle(locks.acquire('short:burst', { timeoutMs: 2 }))),
    );
    await failPoint('off');

    const kinds = outcomes.map((outcome) => (outcome as Error).constructor.name);
    expect(new Set(kinds)).toEqual(new Set(['LockNotAcquiredError']));
    await eventually(async () => (await holder.inspect('short:burst'))?.waiting === 0);
    await held.release();
  });

  it('a waiter in line whose renewal MongoDB leaves unanswered fails with LockStoreUnavailableError', async () => {
    const appName = 'parked-unanswered';
    const holder = await kit.service();
    const held = await holder.acquire('parked:k', { ttlMs: 30_000 });
    const locks = await kit.service({ client: await appClient(appName) });
    // Renewed a third into its 3 s lease, well before its deadline.
    const waiting = settle(locks.acquire('parked:k', { timeoutMs: 2_500, ttlMs: 3_000 }));
    await eventually(async () => (await holder.inspect('parked:k'))?.waiting === 1);
    // Its next write (the renewal) is held on the server past the deadline and the wait for a
    // late reply, as a frozen or unreachable MongoDB would leave it.
    const before = await failPoint(
      { times: 1 },
      { failCommands: ['findAndModify'], appName, blockConnection: true, blockTimeMS: 4_000 },
    );

    const failed = await waiting;

    await failPointFired(before + 1);
    expect(failed).toBeInstanceOf(LockStoreUnavailableError);
    await held.release();
  });

  it('a wait whose command times out just before its deadline names the key, with the store error as its cause', async () => {
    const appName = 'command-timeout';
    const locks = await kit.service({ client: await appClient(appName), operationTimeoutMs: 300 });
    // The join is held on the server; the command's bound (300 ms) ends just before the wait's
    // deadline, too late for another try.
    await failPoint(
      { times: 1 },
      { failCommands: ['findAndModify'], appName, blockConnection: true, blockTimeMS: 2_000 },
    );

    const failed = await settle(locks.acquire('deadline:k', { timeoutMs: 320 }));

    expect(failed).toBeInstanceOf(LockStoreUnavailableError);
    expect((failed as Error).message).toContain('"deadline:k"');
    expect((failed as Error).cause).toBeInstanceOf(LockStoreUnavailableError);
    expect(((failed as Error).cause as Error).message).toMatch(/did not answer acquire/);
  });

  it('callers held back by an earlier caller here whose join MongoDB leaves unanswered fail with LockStoreUnavailableError', async () => {
    const appName = 'call-order-unanswered';
    const locks = await kit.service({ client: await appClient(appName) });
    // The first caller's join on each key is held on the server past the later callers'
    // deadlines and margins; the first caller on `b` gives up before it is answered.
    const before = await failPoint(
      { times: 2 },
      { failCommands: ['findAndModify'], appName, blockConnection: true, blockTimeMS: 3_000 },
    );
    const first = locks.acquire('order:a', { timeoutMs: 10_000 });
    const firstOnB = settle(locks.acquire('order:b', { timeoutMs: 200 }));
    await failPointFired(before + 2);

    const [second, secondOnB] = await Promise.all([
      settle(locks.acquire('order:a', { timeoutMs: 200 })),
      settle(locks.acquire('order:b', { timeoutMs: 300 })),
    ]);

    // MongoDB, not a holder, kept them (503 over HTTP, not 423), and the errors name the key.
    expect(second).toBeInstanceOf(LockStoreUnavailableError);
    expect((second as Error).message).toContain('"order:a"');
    expect(await firstOnB).toBeInstanceOf(LockStoreUnavailableError);
    expect(secondOnB).toBeInstanceOf(LockStoreUnavailableError);
    expect((secondOnB as Error).message).toContain('"order:b"');
    // Held back by the first caller's failure, it names that failure as its cause.
    expect((secondOnB as Error).cause).toBe(await firstOnB);
    await (await first).release();
  });

  it('a caller behind earlier callers here on a key held elsewhere is busy (LockNotAcquiredError)', async () => {
    const holder = await kit.service();
    const held = await holder.acquire('order:held', { ttlMs: 30_000 });
    for (const localHandOff of [true, false]) {
      const locks = await kit.service({ localHandOff });
      // The first caller's join was answered: it waits in line.
      const first = settle(locks.acquire('order:held', { timeoutMs: 3_000 }));
      await eventually(async () => (await holder.inspect('order:held'))?.waiting === 1);
      await sleep(10);

      const second = await settle(locks.acquire('order:held', { timeoutMs: 200 }));

      expect(second).toBeInstanceOf(LockNotAcquiredError);
      expect(second).not.toBeInstanceOf(LockStoreUnavailableError);
      expect(await first).toBeInstanceOf(LockNotAcquiredError);
    }
    await held.release();
  });
});
