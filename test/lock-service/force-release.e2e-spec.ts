import { LockLostError } from '../../lib/errors';
import { eventually, LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

describe('LockService.forceRelease', () => {
  const kit = LockTestKit.forSuite();

  it('frees the holder and tells it; the waiter then holds the key undisturbed', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    // Repeated: the local holder's give-back once raced the command (now sent after it).
    for (let round = 0; round < 5; round += 1) {
      const key = `forced:${round}`;
      const held = await a.acquire(key, { renew: true });
      const waiting = b.acquire(key, { timeoutMs: 10_000, renew: true });
      await eventually(() => b.diagnostics.waiters === 1);
      const released = await a.forceRelease(key);
      expect(released.map((holder) => holder.holderId)).toEqual(['A']);
      expect(held.lost).toBe(true);
      expect(held.signal.reason).toBeInstanceOf(LockLostError);
      const next = await waiting;
      expect(next.fence).toBeGreaterThan(held.fence);
      await sleep(200);
      // Still B's, renewed: nothing freed it after it was handed over.
      expect(next.lost).toBe(false);
      expect((await a.inspect(key))?.holderId).toBe('B');
      await next.release();
    }
  });

  it('leaves a document lock whose id reads like the key alone', async () => {
    const service = await kit.service({ holderId: 'A' });
    const name = 'force_release_documents';
    await (
      await kit.client()
    )
      .db(kit.mongo.dbName)
      .collection(name)
      .insertOne({ _id: 'abc' as never });
    const document = await service.documents(name).acquire('abc');
    const key = await service.acquire('"abc"');
    // The document lock's internal key is its id's Extended JSON: the same string.
    expect(document.keys).toEqual(['"abc"']);
    await service.forceRelease('"abc"');
    expect(key.lost).toBe(true);
    expect(document.lost).toBe(false);
    await document.release();
  });
});
