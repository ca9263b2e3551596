// A key's line holds at most 1,000 entries (holders and waiters). A request at that capacity has
// no room for a waiting entry: it is refused at once, even with a timeout, saying why, and
// joins once an entry has left. The same on MongoDB and in MongoLockTestingModule.
import { Long } from 'mongodb';
import type { Document } from 'mongodb';
import { LockNotAcquiredError } from '../../lib/errors';
import { LockService } from '../../lib';
import type { LockHandle } from '../../lib/lock-handle';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { startTestingModule } from '../testing/testing-kit';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

const CAP = 1_000;

describe('a request at the line capacity, on MongoDB', () => {
  const kit = LockTestKit.forSuite();

  /**
   * A key at capacity: `CAP - 1` live shared entries of another process written directly (a
   * loop of 1,000 acquisitions is slow), and one more taken by a service, which the test may
   * release.
   */
  async function fill(key: string): Promise<LockHandle> {
    const client = await kit.client();
    const now = Date.now();
    const line = Array.from({ length: CAP - 1 }, (_, index) => ({
      t: `ghost-${index}`,
      f: Long.fromNumber(now + index),
      e: new Date(now + 60_000),
      h: 'ghost',
      m: 's',
    }));
    await client
      .db(kit.mongo.dbName)
      .collection<Document>(`${kit.collectionName}_line`)
      .insertOne({
        _id: key as never,
        f: Long.fromNumber(now + CAP),
        line,
        lead: null,
        gcAt: null,
      });
    const crowd = await kit.service();
    return crowd.acquire(key, { mode: 'shared', ttlMs: 60_000, timeoutMs: 0 });
  }

  it('is refused at once, even with a timeout, saying why, and nothing is written', async () => {
    await fill('cap:refused');
    const locks = await kit.service();
    const before = await kit.rawLocks();
    const startedAt = performance.now();
    const refused = await locks
      .acquire('cap:refused', { mode: 'shared', timeoutMs: 5_000 })
      .catch((error: unknown) => error);
    expect(performance.now() - startedAt).toBeLessThan(2_000);
    expect(refused).toBeInstanceOf(LockNotAcquiredError);
    expect((refused as Error).message).toContain(`${CAP} calls already hold or wait for it`);
    expect(await locks.tryAcquire('cap:refused', { mode: 'shared' })).toBeNull();
    expect(await kit.rawLocks()).toEqual(before);
  });

  it('joins once an entry has left', async () => {
    const last = await fill('cap:freed');
    const locks = await kit.service();
    await expect(locks.acquire('cap:freed', { mode: 'shared', timeoutMs: 1_000 })).rejects.toThrow(
      LockNotAcquiredError,
    );
    await last.release();
    const handle = await locks.acquire('cap:freed', { mode: 'shared', timeoutMs: 1_000 });
    expect(handle.mode).toBe('shared');
    await handle.release();
  });
});

describe('a request at the line capacity, in MongoLockTestingModule (engine v2)', () => {
  it('is refused at once, even with a timeout, and joins once an entry left', async () => {
    const store = new LockTestingStore();
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ store, holderId: 'waiter' })],
    });
    try {
      const holders = [];
      for (let index = 0; index < CAP; index += 1) {
        holders.push(await store.holdAs('crowd', `reader-${index}`, { mode: 'shared' }));
      }
      const service = moduleRef.get(LockService);
      // A full line has no room for a waiting entry: not a wait that could run out.
      await expect(service.acquire('crowd', { mode: 'shared', timeoutMs: 5_000 })).rejects.toThrow(
        `${CAP} calls already hold or wait for it`,
      );
      await holders[0].release();
      const handle = await service.acquire('crowd', { mode: 'shared', timeoutMs: 5_000 });
      expect(handle.mode).toBe('shared');
      await handle.release();
    } finally {
      await moduleRef.close();
    }
  });
});
