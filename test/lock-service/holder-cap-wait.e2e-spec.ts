// A request at the holder cap (1,000 live holders on a key) waits like any request for a busy
// lock, up to its timeoutMs; it failed after one round of attempts (about 239 ms).
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

describe('a request at the holder cap', () => {
  const kit = LockTestKit.forSuite();

  /**
   * A key at the cap: `CAP - 1` live shared holders of another process written directly (a
   * loop of 1,000 acquisitions is slow, each attempt reading a larger document), and one more
   * taken by a service, which the test may release.
   */
  async function fill(key: string): Promise<LockHandle> {
    const client = await kit.client();
    const now = Date.now();
    const holders: Record<string, unknown> = {};
    for (let index = 0; index < CAP - 1; index += 1) {
      holders[`hcap${String(index).padStart(20, '0')}`] = {
        owner: `e:ghost-${index}`,
        holder: 'ghost',
        fence: Long.fromNumber(now + index),
        weight: 1,
        acquiredAt: new Date(now),
        expiresAt: new Date(now + 60_000),
        scope: null,
      };
    }
    await client
      .db(kit.mongo.dbName)
      .collection<Document>(kit.collectionName)
      .insertOne({
        _id: key as never,
        fence: Long.fromNumber(now + CAP),
        permits: null,
        holders,
        gcAt: null,
      });
    const crowd = await kit.service();
    return crowd.acquire(key, { mode: 'shared', ttlMs: 60_000, timeoutMs: 0 });
  }

  it('waits for a holder to leave, then gets in', async () => {
    const last = await fill('cap:wait');
    const waiter = await kit.service();
    const startedAt = performance.now();
    const waiting = waiter.acquire('cap:wait', { mode: 'shared', timeoutMs: 5_000 });
    const outcome = waiting.then(
      (handle) => ({ handle, ms: performance.now() - startedAt }),
      (error: unknown) => ({ error, ms: performance.now() - startedAt }),
    );
    await new Promise((resolve) => setTimeout(resolve, 700));
    await last.release();
    const settled = await outcome;
    expect(settled).toMatchObject({ handle: expect.anything() });
    expect(settled.ms).toBeGreaterThanOrEqual(700);
    expect(settled.ms).toBeLessThan(3_000);
    if ('handle' in settled) await settled.handle.release();
  });

  it('fails at its timeoutMs, not before, saying the key has all the holders it can have', async () => {
    const last = await fill('cap:timeout');
    const waiter = await kit.service();
    const startedAt = performance.now();
    const error = await waiter
      .acquire('cap:timeout', { mode: 'shared', timeoutMs: 1_000 })
      .catch((caught: unknown) => caught);
    const ms = performance.now() - startedAt;
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect(ms).toBeGreaterThanOrEqual(990);
    expect((error as Error).message).toMatch(
      /^Lock "cap:timeout" not acquired within 1000 ms.*: it has 1000 holders, the most one key can have$/,
    );
    expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(50_000);
    await last.release();
  });

  it("takes its place in line there: the freed slot is its, not a later poller's", async () => {
    const last = await fill('cap:line');
    const waiter = await kit.service();
    const poller = await kit.service();
    const waiting = waiter.acquire('cap:line', { mode: 'shared', timeoutMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // Its place is recorded: the key's line shows one waiter.
    expect((await waiter.inspect('cap:line'))?.waiting).toBe(1);
    await last.release();
    // A poller that comes right after the release finds the slot held back for the waiter.
    expect(await poller.tryAcquire('cap:line', { mode: 'shared' })).toBeNull();
    const handle = await waiting;
    expect(handle.mode).toBe('shared');
    await handle.release();
  });

  it('at once (timeoutMs 0) it is refused at once, saying why', async () => {
    const last = await fill('cap:once');
    const waiter = await kit.service();
    const error = await waiter
      .acquire('cap:once', { mode: 'shared', timeoutMs: 0 })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as Error).message).toMatch(/^Lock "cap:once" not acquired.*1000 holders/);
    await last.release();
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
