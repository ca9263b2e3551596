import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { firstValueFrom, take, toArray } from 'rxjs';
import {
  InvalidLockOptionsError,
  Locked,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  LockServiceClosedError,
  MongoLockError,
  type LockEvent,
} from '../../lib';
import { FENCES_PER_ENTRY } from '../../lib/store/line/line-document';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { eventually, gate, settleTime, startTestingModule } from './testing-kit';

jest.setTimeout(30_000);

/**
 * A waiter woken by the release settles within this: the safety poll is 5 s and the leases
 * 5 s or more, so a waiter the release does not wake is over it.
 */
const WOKEN_WITHIN_MS = 1_000 + LOAD_SLACK_MS;

/** What a test asks the ledger to wait for while it holds its lock. */
const holds = new Map<string, Promise<void>>();

@Injectable()
class LedgerService {
  /** Calls running now, per account, and the most seen at once. */
  readonly running = new Map<string, number>();
  maxConcurrent = 0;

  /** Waits up to 2 s for the account's lock; returns the fence it ran under. */
  @Locked('ledger:{args.0}', { timeoutMs: 2_000 })
  async post(account: string): Promise<bigint> {
    const now = (this.running.get(account) ?? 0) + 1;
    this.running.set(account, now);
    this.maxConcurrent = Math.max(this.maxConcurrent, now);
    try {
      await holds.get(account);
      return (LockService.current() as { fence: bigint }).fence;
    } finally {
      this.running.set(account, now - 1);
    }
  }

  /** One attempt: fails at once when the account is held. */
  @Locked('ledger:{args.0}', { timeoutMs: 0 })
  async postNow(_account: string): Promise<string | undefined> {
    return LockService.current()?.key;
  }

  /** A short lease renewed often, so a lost lease is noticed within ~100 ms. */
  @Locked('report:{args.0}', { ttlMs: 1_000, renew: { intervalRatio: 0.1 } })
  async report(name: string, started: () => void): Promise<AbortSignal> {
    const signal = (LockService.current() as { signal: AbortSignal }).signal;
    started();
    await holds.get(name);
    return signal;
  }
}

describe('MongoLockTestingModule', () => {
  let moduleRef: TestingModule;
  let ledger: LedgerService;
  let locks: LockService;
  let store: LockTestingStore;

  beforeEach(async () => {
    moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ holderId: 'app' })],
      providers: [LedgerService],
    });
    ledger = moduleRef.get(LedgerService);
    locks = moduleRef.get(LockService);
    store = moduleRef.get(LockTestingStore);
  });

  afterEach(async () => {
    holds.clear();
    await moduleRef?.close();
  });

  it('locks a provider method with @Locked, resolving LockService through Nest', async () => {
    const fence = await ledger.post('acc-1');
    expect(typeof fence).toBe('bigint');
    expect(await ledger.postNow('acc-1')).toBe('ledger:acc-1');
    const state = await locks.inspect('ledger:acc-1');
    expect(state).toMatchObject({ key: 'ledger:acc-1', held: false, holderId: null });
    expect(state?.fence).toBeGreaterThan(fence);
  });

  it('excludes concurrent calls; the waiter is woken at once by the release', async () => {
    const first = gate();
    holds.set('acc-1', first.opened);
    const firstCall = ledger.post('acc-1');
    await eventually(() => ledger.running.get('acc-1') === 1);
    holds.delete('acc-1');
    const secondCall = ledger.post('acc-1');
    await eventually(() => locks.diagnostics.waiters === 1);
    expect(ledger.running.get('acc-1')).toBe(1);

    first.open();
    const firstFence = await firstCall;
    // The lease is 30 s and the safety poll 5 s: only the release can wake the waiter this soon.
    expect(await settleTime(secondCall)).toBeLessThan(WOKEN_WITHIN_MS);
    expect(await secondCall).toBeGreaterThan(firstFence);
    expect(ledger.maxConcurrent).toBe(1);
  });

  it('under fake timers, each release lets its waiting call go on, with no timer advanced', async () => {
    const a = await store.holdAs('a', 'other');
    const b = await store.holdAs('b', 'other');
    const taken: string[] = [];
    const acquireNoted = (key: string) =>
      locks.acquire(key, { timeoutMs: 20_000 }).then((handle) => {
        taken.push(key);
        return handle;
      });
    const [waitA, waitB] = [acquireNoted('a'), acquireNoted('b')];
    await eventually(() => locks.diagnostics.streamEstablished && locks.diagnostics.waiters === 2);
    // Promise continuations only: no timer, real or fake, runs in between.
    const settlePromises = async () => {
      for (let turn = 0; turn < 2_000; turn++) await Promise.resolve();
    };
    jest.useFakeTimers();
    try {
      await a.release();
      await settlePromises();
      expect(taken).toEqual(['a']);
      await b.release();
      await settlePromises();
      expect(taken).toEqual(['a', 'b']);
    } finally {
      jest.useRealTimers();
    }
    await (await waitA).release();
    await (await waitB).release();
  });

  it('times out with LockNotAcquiredError naming the holder', async () => {
    const held = gate();
    holds.set('acc-1', held.opened);
    const holding = ledger.post('acc-1');
    await eventually(() => ledger.running.get('acc-1') === 1);

    const error: unknown = await ledger.postNow('acc-1').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect(error).toMatchObject({ keys: ['ledger:acc-1'], holderId: 'app' });
    expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(0);

    const waited = locks.acquire('ledger:acc-1', { timeoutMs: 200 });
    await expect(waited).rejects.toBeInstanceOf(LockNotAcquiredError);
    held.open();
    await holding;
  });

  it('holdAs makes a call fail at once, or wait until the other holder releases', async () => {
    const other = await store.holdAs('ledger:acc-1', 'billing-worker', 5_000);
    expect(other).toMatchObject({ key: 'ledger:acc-1', holderId: 'billing-worker' });

    const refused: unknown = await ledger.postNow('acc-1').catch((caught: unknown) => caught);
    expect(refused).toBeInstanceOf(LockNotAcquiredError);
    expect(refused).toMatchObject({ holderId: 'billing-worker' });
    expect((refused as LockNotAcquiredError).retryAfterMs).toBeLessThanOrEqual(5_000);

    const waiting = ledger.post('acc-1');
    await eventually(() => locks.diagnostics.waiters === 1);
    await expect(other.release()).resolves.toBe('released');
    expect(await settleTime(waiting)).toBeLessThan(WOKEN_WITHIN_MS);
    expect(await waiting).toBeGreaterThan(other.fence);
    // A retried release of the same acquisition still reports success.
    await expect(other.release()).resolves.toBe('released');
  });

  it('holdAs refuses a held key and the holder id of the application under test', async () => {
    await store.holdAs('ledger:acc-1', 'billing-worker');
    await expect(store.holdAs('ledger:acc-1', 'someone-else')).rejects.toMatchObject({
      name: 'LockNotAcquiredError',
      holderId: 'billing-worker',
    });
    await expect(store.holdAs('ledger:acc-2', 'app')).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    // What no instance could be called: the module options refuse it too.
    for (const holderId of ['', '$worker', 'worker-\uD800', 'a\0b']) {
      await expect(store.holdAs('ledger:acc-2', holderId)).rejects.toBeInstanceOf(
        InvalidLockOptionsError,
      );
    }
    // A misspelt option is refused, not held for the default lease.
    await expect(store.holdAs('ledger:acc-2', 'worker', { ttl: 5 } as never)).rejects.toThrow(
      /ttl is not an option \(did you mean ttlMs\?\)/,
    );
    expect(await locks.inspect('ledger:acc-2')).toBeNull();
  });

  it('refuses a locked transaction, naming the testing module', async () => {
    let ran = false;
    const run = locks.withLock('ledger:acc-1', () => void (ran = true), { transaction: true });
    await expect(run).rejects.toThrow(/the in-memory store of MongoLockTestingModule has none/);
    expect(ran).toBe(false);
  });

  it('refuses document locks, naming the testing module', async () => {
    const accounts = locks.documents('accounts');
    await expect(accounts.acquire('acc-1')).rejects.toThrow(
      /the in-memory store of MongoLockTestingModule has none/,
    );
  });

  it('expire ends a holder lease: its signal aborts at its next renewal and the call fails', async () => {
    const held = gate();
    holds.set('monthly', held.opened);
    const started = gate();
    const running = ledger.report('monthly', started.open);
    await started.opened;

    expect(store.expire('report:monthly')).toBe(true);
    // The key is free for others at once, as after a lease that ran out.
    expect(store.inspect('report:monthly')?.held).toBe(false);
    const next = await store.holdAs('report:monthly', 'other-instance');

    held.open();
    const error: unknown = await running.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LockLostError);
    await next.release();
  });

  it('expire makes the signal of a running holder abort with LockLostError', async () => {
    // Renewed every 100 ms; its local deadline (what a holder not told would wait for) is ~10 s.
    const handle = await locks.acquire('nightly', {
      ttlMs: 10_000,
      renew: { intervalRatio: 0.01 },
    });
    const aborted = new Promise<unknown>((resolve) =>
      handle.signal.addEventListener('abort', () => resolve(handle.signal.reason)),
    );
    store.expire('nightly');
    expect(await settleTime(aborted)).toBeLessThan(100 + LOAD_SLACK_MS);
    expect(await aborted).toBeInstanceOf(LockLostError);
    expect(handle.lost).toBe(true);
    await expect(handle.release()).rejects.toBeInstanceOf(LockLostError);
  });

  it('a holder that does not renew finds the expiry at its next extend() or release()', async () => {
    const extended = await locks.acquire('nightly', { ttlMs: 30_000 });
    expect(store.expire('nightly')).toBe(true);
    expect(store.expire('nightly')).toBe(false); // nothing live left to end
    await expect(extended.extend()).rejects.toBeInstanceOf(LockLostError);
    expect(extended.signal.aborted).toBe(true);

    const released = await locks.acquire('nightly', { ttlMs: 30_000 });
    expect(released.fence).toBeGreaterThan(extended.fence);
    store.expire('nightly');
    await expect(released.release()).rejects.toBeInstanceOf(LockLostError);
    expect(store.inspect('nightly')?.held).toBe(false);
  });

  it('gives strictly increasing fences across holders, never below the store clock', async () => {
    const before = BigInt(store.now());
    const fences: bigint[] = [];
    for (let round = 0; round < 3; round += 1) {
      fences.push(await ledger.post('acc-1'));
      const other = await store.holdAs('ledger:acc-1', 'billing-worker');
      fences.push(other.fence);
      await other.release();
    }
    expect(fences[0]).toBeGreaterThanOrEqual(before);
    for (let index = 1; index < fences.length; index += 1) {
      expect(fences[index]).toBeGreaterThan(fences[index - 1]);
    }
  });

  it('inspect reports holder, fence and remaining lease, never the owner token', async () => {
    expect(await locks.inspect('ledger:none')).toBeNull();
    const handle = await locks.acquire('ledger:acc-1', { ttlMs: 10_000 });
    const state = await locks.inspect('ledger:acc-1');
    expect(state).toMatchObject({ held: true, holderId: 'app', fence: handle.fence });
    expect(state?.remainingMs).toBeGreaterThan(9_000);
    expect(state?.remainingMs).toBeLessThanOrEqual(10_000);
    expect(state).not.toHaveProperty('owner');
    expect(store.inspect('ledger:acc-1')).toEqual({
      ...state,
      remainingMs: expect.any(Number) as number,
      holders: [
        { holderId: 'app', fence: handle.fence, weight: 1, remainingMs: expect.any(Number) },
      ],
    });
    await handle.release();
    expect(await locks.inspect('ledger:acc-1')).toMatchObject({ held: false, remainingMs: 0 });
  });

  it('events$ reports acquisitions and releases, with holder and fence', async () => {
    const seen = firstValueFrom(locks.events$.pipe(take(4), toArray()));
    await eventually(() => locks.diagnostics.streamEstablished);

    const fence = await ledger.post('acc-1');
    const other = await store.holdAs('ledger:acc-1', 'billing-worker');
    await other.release();

    const events: LockEvent[] = await seen;
    expect(
      events.map(({ type, key, holderId, fence: eventFence }) => [type, key, holderId, eventFence]),
    ).toEqual([
      ['acquired', 'ledger:acc-1', 'app', fence],
      // Engine v2: a release's event does not say who left.
      ['released', 'ledger:acc-1', null, null],
      ['acquired', 'ledger:acc-1', 'billing-worker', other.fence],
      ['released', 'ledger:acc-1', null, null],
    ]);
    expect(events.every((event) => event.at instanceof Date)).toBe(true);
  });

  it('events$ reports nothing when a waiter gives up, as on MongoDB', async () => {
    const events: string[] = [];
    const subscription = locks.events$.subscribe((event) =>
      events.push(`${event.type} ${event.holderId ?? '-'}`),
    );
    try {
      await eventually(() => locks.diagnostics.eventsFlowing);
      const held = await store.holdAs('ledger:acc-9', 'billing-worker');
      await eventually(() => events.length === 1);
      for (const timeoutMs of [100, 50]) {
        await expect(locks.acquire('ledger:acc-9', { timeoutMs })).rejects.toThrow(/not acquired/);
      }
      await held.release();
      await eventually(() => events.length >= 2);
      expect(events).toEqual(['acquired billing-worker', 'released -']);
    } finally {
      subscription.unsubscribe();
    }
  });

  it('releaseAllHeld tells the holders and frees their keys', async () => {
    const first = await locks.acquire('a');
    const second = await locks.acquire(['b', 'c']);
    await expect(locks.releaseAllHeld()).resolves.toBe(3);
    expect(first.signal.reason).toBeInstanceOf(LockLostError);
    expect(second.lost).toBe(true);
    for (const key of ['a', 'b', 'c']) expect(store.inspect(key)?.held).toBe(false);
  });

  it('shuts down like the real module: no new locks, holders told, locks released', async () => {
    const app = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ store, shutdownGraceMs: 100 })],
    });
    const appLocks = app.get(LockService);
    const working = gate();
    let signal: AbortSignal | undefined;
    const work = appLocks.withLock('shutdown:job', async (lock) => {
      signal = lock.signal;
      await working.opened;
    });
    await eventually(() => signal !== undefined);

    await app.close();
    expect(signal?.aborted).toBe(true);
    expect(store.inspect('shutdown:job')?.held).toBe(false);
    await expect(appLocks.acquire('shutdown:other')).rejects.toBeInstanceOf(LockServiceClosedError);
    working.open();
    await expect(work).rejects.toBeInstanceOf(LockLostError);
  });
});

describe('LockTestingStore', () => {
  it('binds @Locked provider methods on init(), as MongoLockModule does', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [MongoLockTestingModule.forRoot()],
      providers: [LedgerService],
    }).compile();
    try {
      await expect(moduleRef.get(LedgerService).postNow('acc-1')).rejects.toBeInstanceOf(
        MongoLockError,
      );
      await moduleRef.init();
      await expect(moduleRef.get(LedgerService).postNow('acc-1')).resolves.toBe('ledger:acc-1');
    } finally {
      await moduleRef.close();
    }
  });

  it('decides leases by its own clock', async () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const store = new LockTestingStore({ clock: () => now });
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ store })],
    });
    try {
      const locks = moduleRef.get(LockService);
      const other = await store.holdAs('clocked', 'other-instance', 60_000);
      await expect(locks.tryAcquire('clocked')).resolves.toBeNull();
      expect(store.inspect('clocked')).toMatchObject({ held: true, remainingMs: 60_000 });

      now += 60_000; // the other holder's lease ends by the store's clock
      const handle = await locks.tryAcquire('clocked');
      expect(handle?.fence).toBeGreaterThan(other.fence);
      await expect(other.release()).resolves.toBe('lost');
      await expect(other.renew()).resolves.toBe(false);
      await handle?.release();
    } finally {
      await moduleRef.close();
    }
  });

  it('moves fences past the block each lease reserves, and hands a lock on only by a write', async () => {
    const store = new LockTestingStore({ clock: () => Date.parse('2030-01-01T00:00:00Z') });
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ store })],
    });
    try {
      const locks = moduleRef.get(LockService);
      const first = await locks.acquire('run');
      const next = locks.acquire('run', { timeoutMs: 2_000 });
      await eventually(() => locks.diagnostics.waiters === 1);
      // `expire()` ends the lease behind the holder's back: its release must find out.
      store.expire('run');
      await expect(first.release()).rejects.toBeInstanceOf(LockLostError);
      // The clock stands still: only the reserved block keeps the fences apart.
      const second = await next;
      expect(second.fence).toBe(first.fence + FENCES_PER_ENTRY);
      await second.release();
    } finally {
      await moduleRef.close();
    }
  });

  it('is shared by applications given the same store, as instances of one service', async () => {
    const store = new LockTestingStore();
    const [appA, appB] = await Promise.all(
      ['instance-a', 'instance-b'].map((holderId) =>
        startTestingModule({ imports: [MongoLockTestingModule.forRoot({ store, holderId })] }),
      ),
    );
    try {
      const locksA = appA.get(LockService);
      const locksB = appB.get(LockService);
      const held = await locksA.acquire('shared');
      const waiting = locksB.acquire('shared', { timeoutMs: 5_000 });
      await eventually(() => locksB.diagnostics.waiters === 1);
      expect(appA.get(LockTestingStore)).toBe(store);

      await held.release();
      expect(await settleTime(waiting)).toBeLessThan(WOKEN_WITHIN_MS);
      const taken = await waiting;
      expect(taken.fence).toBeGreaterThan(held.fence);
      expect(store.inspect('shared')).toMatchObject({ held: true, holderId: 'instance-b' });
      await taken.release();
    } finally {
      await Promise.all([appA.close(), appB.close()]);
    }
  });

  it('gives each application of a reused forRoot() its own store', async () => {
    const lockModule = MongoLockTestingModule.forRoot();
    const appA = await startTestingModule({ imports: [lockModule] });
    const appB = await startTestingModule({ imports: [lockModule] });
    try {
      expect(appA.get(LockTestingStore)).not.toBe(appB.get(LockTestingStore));
      const held = await appA.get(LockService).acquire('separate');
      const alsoHeld = await appB.get(LockService).tryAcquire('separate');
      expect(alsoHeld).not.toBeNull();
      await Promise.all([held.release(), alsoHeld?.release()]);
    } finally {
      await Promise.all([appA.close(), appB.close()]);
    }
  });

  it('waits by polling when change streams are off', async () => {
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ changeStreams: 'off', pollIntervalMs: 20 })],
    });
    try {
      const locks = moduleRef.get(LockService);
      const other = await moduleRef.get(LockTestingStore).holdAs('polled', 'other-instance');
      const waiting = locks.acquire('polled', { timeoutMs: 5_000 });
      await eventually(() => locks.diagnostics.waiters === 1);
      await other.release();
      const handle = await waiting;
      expect(locks.diagnostics.streamsOpened).toBe(0);
      await handle.release();
    } finally {
      await moduleRef.close();
    }
  });

  it('waitForRelease emits when another holder releases', async () => {
    const moduleRef = await startTestingModule({ imports: [MongoLockTestingModule.forRoot()] });
    try {
      const locks = moduleRef.get(LockService);
      const other = await moduleRef.get(LockTestingStore).holdAs('watched', 'other-instance');
      const released = firstValueFrom(locks.waitForRelease('watched'));
      await eventually(() => locks.diagnostics.streamEstablished);
      await other.release();
      expect(await settleTime(released)).toBeLessThan(WOKEN_WITHIN_MS);
    } finally {
      await moduleRef.close();
    }
  });
});
