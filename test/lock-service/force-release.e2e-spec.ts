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

  it('frees a hand-off not yet confirmed, leaving no grant behind', async () => {
    const a = await kit.service({ holderId: 'A' });
    const client = await kit.client();
    const locks = client
      .db(kit.mongo.dbName)
      .collection<Record<string, unknown>>(kit.collectionName);
    const held = await a.acquire('forced:grant');
    // What a release that handed the key to a waiting process leaves: a placeholder owner.
    await locks.updateOne(
      { _id: 'forced:grant' as never },
      { $set: { owner: 'grant:placeholder', grantedTo: 'reservation-1', grantee: 'B' } },
    );
    await held.release().catch(() => undefined);
    await a.forceRelease('forced:grant');
    const document = await locks.findOne({ _id: 'forced:grant' as never });
    expect(document).toMatchObject({ owner: null, grantedTo: null, grantee: null });
  });
});
