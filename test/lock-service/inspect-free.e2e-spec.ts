import type { Document } from 'mongodb';
import type { LockState } from '../../lib/interfaces';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A free key names no holder and no expiry: `holderId`, `acquiredAt`, `expiresAt` are null. */
function expectFree(state: LockState | null, fence: bigint): void {
  expect(state).toMatchObject({
    held: false,
    holderId: null,
    acquiredAt: null,
    expiresAt: null,
    remainingMs: 0,
    mode: null,
    holders: [],
  });
  // The fence still says how far the key's tokens went.
  expect(state!.fence).toBeGreaterThanOrEqual(fence);
}

describe('inspect() of a free key', () => {
  const kit = LockTestKit.forSuite();

  it('after a release, names no holder and no expiry', async () => {
    const locks = await kit.service({ holderId: 'released-holder' });
    const handle = await locks.acquire('free:released', { ttlMs: 30_000 });
    expect(await locks.inspect('free:released')).toMatchObject({
      held: true,
      holderId: 'released-holder',
    });
    await handle.release();
    expectFree(await locks.inspect('free:released'), handle.fence);
  });

  it('after a shared hold is released, names no holder and no expiry', async () => {
    const locks = await kit.service({ holderId: 'shared-holder' });
    const handle = await locks.acquire('free:shared', { mode: 'shared', ttlMs: 30_000 });
    await handle.release();
    expectFree(await locks.inspect('free:shared'), handle.fence);
  });

  it('once the lease ran out by the server clock, names no holder and no future expiry', async () => {
    const locks = await kit.service({ holderId: 'expired-holder' });
    const handle = await locks.acquire('free:expired', { ttlMs: 1_000, renew: false });
    await sleep(1_400);
    const state = await locks.inspect('free:expired');
    expectFree(state, handle.fence);
    await handle.release().catch(() => undefined);
  });

  it('of a document lock, after a release, names no holder and no expiry', async () => {
    const client = await kit.client();
    await client
      .db(kit.mongo.dbName)
      .collection('free_docs')
      .insertOne({ _id: 'd1' } as Document);
    const docs = (await kit.service({ holderId: 'doc-holder' })).documents('free_docs');
    const lock = await docs.acquire('d1');
    expect((await docs.inspect('d1'))?.holderId).toBe('doc-holder');
    await lock.release();
    expectFree(await docs.inspect('d1'), lock.fence);
  });
});
