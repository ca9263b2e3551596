// D3-D5: waiters of engine v2 document locks that are not woken by the change that frees them
// (they wake at their entry's renewal, a third of ttlMs later).
import { Decimal128 } from 'mongodb';
import type { Document } from 'mongodb';
import { eventually } from '../lock-service/lock-test-kit';
import { ReplyDelayProxy } from '../support/reply-delay-proxy';
import { scratchSuite, settle, sleep, within } from './helpers';

jest.setTimeout(30_000);

describe('waking waiting acquires (v2)', () => {
  const { kit, state, service } = scratchSuite();

  async function waitingBehindHolder(id: unknown = 'a', waiterId: unknown = id) {
    const holder = (await service()).documents(state.name);
    const waiter = (await service({ safetyPollIntervalMs: 60_000 })).documents(state.name);
    const lock = await holder.acquire(id, { ttlMs: 30_000 });
    const waiting = waiter.acquire(waiterId, { ttlMs: 30_000, timeoutMs: 25_000 });
    void waiting.catch(() => undefined);
    await eventually(async () => (await holder.inspect(id))?.waiting === 1, 5_000);
    return { lock, waiting };
  }

  it.each([
    ['$set of the lock field to null', { $set: { _lock: null } }],
    ['$set of the lock field to {}', { $set: { _lock: {} } }],
    ['$unset of _lock.line (the unlock by hand since 75d7db3; fixed there)', { $unset: { '_lock.line': '' } }],
  ])('D3 other code wiping the line (%s) wakes a waiting acquire', async (_label, wipe) => {
    const { lock, waiting } = await waitingBehindHolder();
    await state.docs.updateOne({ _id: 'a' as never }, wipe as Document);
    const got = await within(waiting, 3_000);
    await lock.release().catch(() => undefined);
    if (got !== 'timeout') await got.release();
    // Observed: 'timeout' (woken by its renewal, 10 s later).
    expect(got).not.toBe('timeout');
  });

  it('D4 a lock field removed by other code while the waiter\'s join reply is on its way still wakes it', async () => {
    const target = new URL(kit.mongo.uri);
    const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
    await proxy.start();
    try {
      const holder = (await service()).documents(state.name);
      const waiter = (
        await service({
          safetyPollIntervalMs: 60_000,
          uri: `mongodb://127.0.0.1:${proxy.port}/?directConnection=true`,
        })
      ).documents(state.name);
      const lock = await holder.acquire('a', { ttlMs: 30_000 });
      expect(await waiter.tryAcquire('a')).toBeNull(); // opens the waiter's change stream
      const held = proxy.holdNextReply('findAndModify', 1_000);
      const waiting = waiter.acquire('a', { ttlMs: 30_000, timeoutMs: 25_000 });
      void waiting.catch(() => undefined);
      await held; // the join landed, its reply is held back 1 s
      // Other code removes the lock field: its waiters are nudged (a removal alone, not in flight, wakes them at once).
      await state.docs.updateOne({ _id: 'a' as never }, { $unset: { _lock: '' } });
      const got = await within(waiting, 3_000);
      await lock.release().catch(() => undefined);
      if (got !== 'timeout') await got.release();
      // Observed: 'timeout' (the nudge came while no wait round listened; woken 10 s later).
      expect(got).not.toBe('timeout');
    } finally {
      await kit.cleanup();
      await proxy.stop();
    }
  });

  it('D5a withLock is re-entrant for ids 1 and Decimal128("1"), which name the same document', async () => {
    await state.docs.insertOne({ _id: 1 as never, n: 0 });
    const docs = (await service()).documents(state.name);
    const result = await settle(
      docs.withLock(1, () =>
        docs.withLock(Decimal128.fromString('1'), () => 'inner', { timeoutMs: 500 }),
      ),
    );
    // Observed: LockNotAcquiredError, the inner call waits behind its own entry.
    expect(result).toBe('inner');
  });

  it('D5b a waiter that names the document as Decimal128("1") is woken when the holder of 1 commits', async () => {
    await state.docs.insertOne({ _id: 1 as never, n: 0 });
    const { lock, waiting } = await waitingBehindHolder(1, Decimal128.fromString('1'));
    await lock.commit({ $inc: { n: 1 } });
    const got = await within(waiting, 3_000);
    if (got !== 'timeout') await got.release();
    // Observed: 'timeout' (the event's key is {"$numberInt":"1"}, the waiter's {"$numberDecimal":"1"}).
    expect(got).not.toBe('timeout');
  });
});
