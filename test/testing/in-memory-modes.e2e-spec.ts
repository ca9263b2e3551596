import type { TestingModule } from '@nestjs/testing';
import { setTimeout as sleep } from 'node:timers/promises';
import { firstValueFrom, take, toArray } from 'rxjs';
import {
  InvalidLockOptionsError,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  type LockEvent,
  type LockHandle,
} from '../../lib';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { eventually, settleTime, startTestingModule } from './testing-kit';

jest.setTimeout(30_000);

/**
 * Settles within this when woken by a change event, with slack for a loaded machine: the
 * safety poll is 5 s and the leases 30 s, so a waiter the event does not wake is over it.
 */
const WOKEN_WITHIN_MS = 1_000 + LOAD_SLACK_MS;

/** Whether `promise` has settled after a few turns and a short pause. */
async function settledSoon(promise: Promise<unknown>, pauseMs = 100): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await sleep(pauseMs);
  return settled;
}

describe('MongoLockTestingModule: shared locks and semaphores', () => {
  let store: LockTestingStore;
  let modules: TestingModule[];

  /** One instance of the service on the shared in-memory collection. */
  async function service(holderId: string): Promise<LockService> {
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ store, holderId })],
    });
    modules.push(moduleRef);
    return moduleRef.get(LockService);
  }

  beforeEach(() => {
    store = new LockTestingStore();
    modules = [];
  });

  afterEach(async () => {
    await Promise.all(modules.map((moduleRef) => moduleRef.close()));
  });

  it('shared holders coexist, each with its own fence; an exclusive holder waits for all of them', async () => {
    const a = await service('a');
    const b = await service('b');
    const r1 = await a.acquire('catalogue', { mode: 'shared' });
    const r2 = await b.acquire('catalogue', { mode: 'shared' });
    expect(r1.mode).toBe('shared');
    expect(r2.fence).toBeGreaterThan(r1.fence);
    expect(store.inspect('catalogue')).toMatchObject({
      held: true,
      mode: 'shared',
      holderId: 'b',
      fence: r2.fence,
      holders: [
        { holderId: 'a', fence: r1.fence, weight: 1 },
        { holderId: 'b', fence: r2.fence, weight: 1 },
      ],
      waiting: 0,
    });
    await expect(b.tryAcquire('catalogue')).resolves.toBeNull();

    const writer = a.acquire('catalogue', { timeoutMs: 10_000 });
    await eventually(() => store.inspect('catalogue')?.waiting === 1);
    await r1.release();
    expect(await settledSoon(writer)).toBe(false);
    await expect(b.tryAcquire('catalogue')).resolves.toBeNull();
    await r2.release();
    // Woken by the release of the last shared holder, not by a poll.
    expect(await settleTime(writer)).toBeLessThan(WOKEN_WITHIN_MS);
    const w = await writer;
    expect(w.mode).toBe('exclusive');
    expect(w.fence).toBeGreaterThan(r2.fence);
    expect(store.inspect('catalogue')).toMatchObject({
      mode: 'exclusive',
      holderId: 'a',
      waiting: 0,
    });
    await expect(b.tryAcquire('catalogue', { mode: 'shared' })).resolves.toBeNull();
    await w.release();
    const r3 = await b.acquire('catalogue', { mode: 'shared' });
    expect(r3.fence).toBeGreaterThan(w.fence);
    await r3.release();
    expect(store.inspect('catalogue')).toMatchObject({ held: false, mode: null, holders: [] });
  });

  it('a semaphore admits at most its permits, counted by weight, all or nothing', async () => {
    const a = await service('a');
    const b = await service('b');
    const one = await a.acquire('exports', { permits: 3 });
    const two = await b.acquire('exports', { permits: 3, weight: 2 });
    expect(two.permits).toEqual({ of: 3, held: 2 });
    expect(store.inspect('exports')).toMatchObject({
      mode: 'semaphore',
      permits: 3,
      holders: [
        { holderId: 'a', weight: 1 },
        { holderId: 'b', weight: 2 },
      ],
    });
    await expect(a.tryAcquire('exports', { permits: 3 })).resolves.toBeNull();

    const wide = a.acquire('exports', { permits: 3, weight: 2, timeoutMs: 10_000 });
    await eventually(() => store.inspect('exports')?.waiting === 1);
    await one.release();
    // One permit is free, but the wide request waiting for two holds it back.
    await expect(b.tryAcquire('exports', { permits: 3 })).resolves.toBeNull();
    await expect(store.holdAs('exports', 'narrow', { permits: 3 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    expect(await settledSoon(wide)).toBe(false);
    await two.release();
    expect(await settleTime(wide)).toBeLessThan(WOKEN_WITHIN_MS);
    const granted = await wide;
    expect(granted.permits).toEqual({ of: 3, held: 2 });
    const narrow = await b.acquire('exports', { permits: 3 });
    await expect(b.tryAcquire('exports', { permits: 3 })).resolves.toBeNull();
    expect(store.inspect('exports')?.holders.map((holder) => holder.weight)).toEqual([2, 1]);
    await Promise.all([granted.release(), narrow.release()]);
  });

  it('refuses a foreign lease no instance could have, and writes nothing', async () => {
    await expect(store.holdAs('too-long', 'other', 2 ** 31)).rejects.toThrow(
      'ttlMs must be an integer from 1 to 2147483647, got 2147483648',
    );
    expect(store.inspect('too-long')).toBeNull();
    const held = await store.holdAs('too-long', 'other', 10_000);
    await expect(held.renew(1e16)).rejects.toBeInstanceOf(InvalidLockOptionsError);
    expect(store.inspect('too-long')?.held).toBe(true);
    await held.release();
  });

  it('refuses a key used in another form, naming it, and writes nothing', async () => {
    const a = await service('a');
    const sem = await a.acquire('mixed', { permits: 2 });
    const before = store.inspect('mixed');
    await expect(a.acquire('mixed', { permits: 3 })).rejects.toThrow(
      'Lock "mixed" is in use as a semaphore of 2 permits; it cannot be taken as a semaphore of 3 permits (every caller of one key must use it in the same form)',
    );
    const shared = await a.acquire('mixed', { mode: 'shared' }).catch((error: unknown) => error);
    expect(shared).toBeInstanceOf(InvalidLockOptionsError);
    expect((shared as InvalidLockOptionsError).option).toBe('mode');
    expect((shared as Error).message).toMatch(/cannot be taken as a shared lock/);
    await expect(a.acquire('mixed', { timeoutMs: 1_000 })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(store.holdAs('mixed', 'other')).rejects.toBeInstanceOf(InvalidLockOptionsError);
    expect(store.inspect('mixed')).toMatchObject({
      fence: before?.fence,
      mode: 'semaphore',
      permits: 2,
      holders: [{ holderId: 'a', fence: sem.fence, weight: 1 }],
      waiting: 0,
    });
    await sem.release();

    const excl = await a.acquire('mixed');
    await expect(a.acquire('mixed', { permits: 2 })).rejects.toThrow(
      /Lock "mixed" is in use as .*; it cannot be taken as a semaphore of 2 permits/,
    );
    await excl.release();
    const reader = await store.holdAs('plain', 'reader', { mode: 'shared' });
    await expect(a.acquire('plain', { permits: 2 })).rejects.toThrow(
      'Lock "plain" is in use as a shared lock; it cannot be taken as a semaphore of 2 permits (every caller of one key must use it in the same form)',
    );
    // A shared holder and an exclusive one use the key in the same form: that one waits.
    await expect(a.tryAcquire('plain')).resolves.toBeNull();
    await reader.release();
  });

  it('an exclusive waiter is not overtaken by shared holders that come later', async () => {
    const a = await service('a');
    const b = await service('b');
    const reader = await store.holdAs('report', 'reader-1', { mode: 'shared' });
    const writer = a.acquire('report', { timeoutMs: 10_000 });
    await eventually(() => store.inspect('report')?.waiting === 1);
    // Shared attempts after the writer's leave it the key, whether they wait or not.
    await expect(b.tryAcquire('report', { mode: 'shared' })).resolves.toBeNull();
    await expect(store.holdAs('report', 'reader-2', { mode: 'shared' })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    const lateReader = b.acquire('report', { mode: 'shared', timeoutMs: 10_000 });
    expect(await settledSoon(lateReader)).toBe(false);
    await eventually(() => store.inspect('report')?.waiting === 2);
    expect(store.inspect('report')).toMatchObject({
      mode: 'shared',
      holders: [{ holderId: 'reader-1' }],
    });

    await expect(reader.release()).resolves.toBe('released');
    const w = await writer;
    expect(await settledSoon(lateReader)).toBe(false);
    await w.release();
    const r = await lateReader;
    expect(r.fence).toBeGreaterThan(w.fence);
    expect(store.inspect('report')).toMatchObject({ mode: 'shared', waiting: 0 });
    await r.release();
  });

  it('a waiter that gives up withdraws its reservation at once', async () => {
    const a = await service('a');
    const b = await service('b');
    const reader = await store.holdAs('audit', 'reader-1', { mode: 'shared' });
    const gaveUp = a.acquire('audit', { timeoutMs: 300 });
    await eventually(() => store.inspect('audit')?.waiting === 1);
    await expect(gaveUp).rejects.toBeInstanceOf(LockNotAcquiredError);
    await eventually(() => store.inspect('audit')?.waiting === 0);
    // Not held back for the reservation's 10 s.
    const r = await b.acquire('audit', { mode: 'shared', timeoutMs: 0 });
    await Promise.all([r.release(), reader.release()]);
  });

  it('a shared holder renews, and its lease ends by itself when it stops renewing', async () => {
    const a = await service('a');
    const r = await a.acquire('lease', { mode: 'shared', ttlMs: 1_000, renew: false });
    await r.extend(1_500);
    const started = Date.now();
    const w = await a.acquire('lease', { timeoutMs: 10_000 });
    expect(Date.now() - started).toBeGreaterThan(800);
    await eventually(() => r.lost || r.signal.aborted);
    expect(w.fence).toBeGreaterThan(r.fence);
    await w.release();
    await expect(r.release()).rejects.toBeInstanceOf(LockLostError);
  });

  it('expire() ends holder entries as it ends an exclusive lease', async () => {
    const a = await service('a');
    const mine = await a.acquire('lease', { mode: 'shared', ttlMs: 30_000 });
    const other = await store.holdAs('lease', 'other', { mode: 'shared' });
    await expect(a.tryAcquire('lease')).resolves.toBeNull();
    expect(other.expire()).toBe(true);
    expect(other.expire()).toBe(false);
    expect(store.inspect('lease')?.holders).toHaveLength(1);
    expect(store.expire('lease')).toBe(true);
    expect(store.expire('lease')).toBe(false);
    expect(store.inspect('lease')).toMatchObject({ held: false, holders: [] });
    const w = await a.acquire('lease', { timeoutMs: 0 });
    await expect(mine.extend()).rejects.toBeInstanceOf(LockLostError);
    await expect(other.renew()).resolves.toBe(false);
    // The join of `w` dropped the ended entries: the release finds the key held by another.
    await expect(other.release()).resolves.toBe('lost');
    await w.release();
    const alone = await store.holdAs('lease', 'other', { mode: 'shared' });
    alone.expire();
    await expect(alone.release()).resolves.toBe('expired');
  });

  it('a foreign shared or permit hold renews and releases its entry; a retried release says released', async () => {
    const reader = await store.holdAs('k', 'reader', { mode: 'shared', ttlMs: 2_000 });
    expect(store.inspect('k')?.holders[0].remainingMs).toBeLessThanOrEqual(2_000);
    await expect(reader.renew(20_000)).resolves.toBe(true);
    expect(store.inspect('k')?.holders[0].remainingMs).toBeGreaterThan(19_000);
    // A foreign hold's renewal sets the lease exactly: a test shortens it this way.
    await expect(reader.renew(1_000)).resolves.toBe(true);
    expect(store.inspect('k')?.holders[0].remainingMs).toBeLessThanOrEqual(1_000);
    await expect(reader.release()).resolves.toBe('released');
    await expect(reader.release()).resolves.toBe('released');
    await expect(reader.renew()).resolves.toBe(false);
    const permit = await store.holdAs('s', 'worker', { permits: 2, weight: 2, ttlMs: 1_000 });
    expect(permit.fence).toBeGreaterThan(0n);
    await expect(store.holdAs('s', 'worker-2', { permits: 2 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await expect(store.holdAs('s', 'worker-2', { permits: 2, weight: 3 })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(store.holdAs('s', 'worker-2', { mode: 'shared', permits: 2 })).rejects.toThrow(
      /mode must be left out with permits/,
    );
    expect(permit.expire()).toBe(true);
    await expect(permit.release()).resolves.toBe('expired');
  });

  it('fences increase across exclusive, shared and semaphore grants of one key', async () => {
    const a = await service('a');
    const fences: bigint[] = [];
    for (let round = 0; round < 3; round += 1) {
      const excl = await a.acquire('k');
      fences.push(excl.fence);
      await excl.release();
      const [r1, r2] = [
        await a.acquire('k', { mode: 'shared' }),
        await a.acquire('k', { mode: 'shared' }),
      ];
      fences.push(r1.fence, r2.fence);
      await Promise.all([r1.release(), r2.release()]);
      const foreign = await store.holdAs('k', 'other', { mode: 'shared' });
      fences.push(foreign.fence);
      await foreign.release();
    }
    for (let index = 1; index < fences.length; index += 1) {
      expect(fences[index]).toBeGreaterThan(fences[index - 1]);
    }
    expect(store.inspect('k')?.fence).toBe(fences[fences.length - 1]);
  });

  it('releaseScope frees the holder entries of the scope, in every key, and wakes their waiters', async () => {
    const a = await service('a');
    const b = await service('b');
    const t1 = [
      await b.acquire('doc:1', { mode: 'shared', scope: 'tenant:1' }),
      await b.acquire('doc:1', { mode: 'shared', scope: 'tenant:1' }),
      await b.acquire('quota', { permits: 2, weight: 2, scope: 'tenant:1' }),
      await b.acquire('doc:2', { scope: 'tenant:1' }),
    ];
    const t2 = await b.acquire('doc:1', { mode: 'shared', scope: 'tenant:2' });
    const quotaWaiter = a.acquire('quota', { permits: 2, timeoutMs: 10_000 });
    expect(await settledSoon(quotaWaiter)).toBe(false);

    await expect(a.releaseScope('tenant:1')).resolves.toBe(4);
    expect(await settleTime(quotaWaiter)).toBeLessThan(WOKEN_WITHIN_MS);
    expect(store.inspect('doc:1')?.holders.map((holder) => holder.fence)).toEqual([t2.fence]);
    expect(store.inspect('doc:2')?.held).toBe(false);
    await expect(a.releaseScope('tenant:1')).resolves.toBe(0);
    // The holders learn it at their next renewal.
    for (const handle of t1) await expect(handle.extend()).rejects.toBeInstanceOf(LockLostError);
    await Promise.all([(await quotaWaiter).release(), t2.release()]);
  });

  it('a waiter wakes at once when a shared holder or permit holder releases', async () => {
    const a = await service('a');
    const reader = await store.holdAs('shelf', 'reader', { mode: 'shared', ttlMs: 30_000 });
    const writer = a.acquire('shelf', { timeoutMs: 10_000 });
    expect(await settledSoon(writer)).toBe(false);
    await reader.release();
    expect(await settleTime(writer)).toBeLessThan(WOKEN_WITHIN_MS);
    await (await writer).release();

    const permit = await store.holdAs('pool', 'worker', { permits: 1, ttlMs: 30_000 });
    const next = a.acquire('pool', { permits: 1, timeoutMs: 10_000 });
    expect(await settledSoon(next)).toBe(false);
    await permit.release();
    expect(await settleTime(next)).toBeLessThan(WOKEN_WITHIN_MS);
    await (await next).release();

    await expect(firstValueFrom(a.waitForRelease('pool'))).resolves.toBeUndefined();
    const held = await store.holdAs('pool', 'worker', { permits: 1, ttlMs: 30_000 });
    const freed = firstValueFrom(a.waitForRelease('pool'));
    expect(await settledSoon(freed)).toBe(false);
    await held.release();
    expect(await settleTime(freed)).toBeLessThan(WOKEN_WITHIN_MS);
  });

  it('events$ reports the joins of shared holders with their holder, and releases without one', async () => {
    const a = await service('a');
    const seen = firstValueFrom(a.events$.pipe(take(4), toArray()));
    await eventually(() => a.diagnostics.streamEstablished);
    const r1 = await a.acquire('feed', { mode: 'shared' });
    const r2 = await store.holdAs('feed', 'other', { mode: 'shared' });
    await r1.release();
    const events: LockEvent[] = await seen;
    expect(events.map(({ type, holderId, fence }) => [type, holderId, fence])).toEqual([
      ['acquired', 'a', r1.fence],
      ['acquired', 'other', r2.fence],
      // A leave does not say who left; the holders after it are reported again.
      ['released', null, null],
      ['acquired', 'other', r2.fence],
    ]);
    await r2.release();
  });

  it('a refused request is told when it could hold, and which holder it waits for', async () => {
    const a = await service('a');
    const refusal = async (attempt: Promise<unknown>) => {
      const error = await attempt.catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      return error as LockNotAcquiredError;
    };
    // Short leases end within 10 s; over 10 s left can only be a long one's.
    const held = [
      await store.holdAs('rw', 'reader-short', { mode: 'shared', ttlMs: 10_000 }),
      await store.holdAs('rw', 'reader-long', { mode: 'shared', ttlMs: 40_000 }),
      await store.holdAs('sem', 'permit-long', { permits: 2, ttlMs: 40_000 }),
      await store.holdAs('sem', 'permit-short', { permits: 2, ttlMs: 10_000 }),
    ];
    const writer = await refusal(a.acquire('rw', { timeoutMs: 0 }));
    expect(writer.holderId).toBe('reader-long');
    expect(writer.retryAfterMs).toBeGreaterThan(10_000);
    const one = await refusal(a.acquire('sem', { permits: 2, timeoutMs: 0 }));
    expect(one.holderId).toBe('permit-short');
    expect(one.retryAfterMs).toBeLessThanOrEqual(10_000);
    const both = await refusal(a.acquire('sem', { permits: 2, weight: 2, timeoutMs: 0 }));
    expect(both.holderId).toBe('permit-long');
    expect(both.retryAfterMs).toBeGreaterThan(10_000);
    await Promise.all(held.map((hold) => hold.release()));
  });

  it('a key has at most 1000 entries, holding or waiting', async () => {
    const a = await service('a');
    const holders = [];
    for (let index = 0; index < 1_000; index += 1) {
      holders.push(await store.holdAs('crowd', `reader-${index}`, { mode: 'shared' }));
    }
    const error: unknown = await a
      .acquire('crowd', { mode: 'shared', timeoutMs: 0 })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as Error).message).toBe(
      'Lock "crowd" not acquired: 1000 calls already hold or wait for it',
    );
    await expect(store.holdAs('crowd', 'one-more', { mode: 'shared' })).rejects.toThrow(
      /1000 calls already hold or wait/,
    );
    await holders[0].release();
    const handle: LockHandle = await a.acquire('crowd', { mode: 'shared', timeoutMs: 0 });
    await handle.release();
  });
});
