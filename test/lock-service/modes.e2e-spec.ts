import { InvalidLockOptionsError, LockLostError, LockNotAcquiredError } from '../../lib/errors';
import { eventually, LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

describe('Lock modes: shared/exclusive locks and semaphores', () => {
  const kit = LockTestKit.forSuite();

  it('shared holders coexist, each with its own fence; an exclusive holder waits for all of them', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const r1 = await a.acquire('catalogue', { mode: 'shared' });
    const r2 = await b.acquire('catalogue', { mode: 'shared' });
    expect(r1.mode).toBe('shared');
    expect(r2.fence).toBeGreaterThan(r1.fence);
    await expect(b.tryAcquire('catalogue')).resolves.toBeNull();
    const writer = a.acquire('catalogue', { timeoutMs: 10_000 });
    await r1.release();
    await expect(b.tryAcquire('catalogue')).resolves.toBeNull();
    await r2.release();
    const w = await writer;
    expect(w.mode).toBe('exclusive');
    expect(w.fence).toBeGreaterThan(r2.fence);
    await expect(b.tryAcquire('catalogue', { mode: 'shared' })).resolves.toBeNull();
    await w.release();
    const r3 = await b.acquire('catalogue', { mode: 'shared' });
    expect(r3.fence).toBeGreaterThan(w.fence);
    await r3.release();
  });

  it('a semaphore admits at most its permits, counted by weight, all or nothing', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const one = await a.acquire('exports', { permits: 3 });
    const two = await b.acquire('exports', { permits: 3, weight: 2 });
    expect(two.permits).toEqual({ of: 3, held: 2 });
    await expect(a.tryAcquire('exports', { permits: 3 })).resolves.toBeNull();
    const waiting = a.acquire('exports', { permits: 3, weight: 2, timeoutMs: 10_000 });
    // Its entry joins the key's line with its first attempt: wait for it (an order, not a time;
    // on a loaded machine the release below could otherwise run first).
    await eventually(async () => (await b.inspect('exports'))?.waiting === 1);
    await one.release();
    await expect(a.tryAcquire('exports', { permits: 3 })).resolves.toBeNull(); // the waiter ahead comes first
    await two.release();
    const wide = await waiting;
    const narrow = await b.acquire('exports', { permits: 3 });
    await Promise.all([wide.release(), narrow.release()]);
  });

  it('refuses a key used in another form, naming it, and writes nothing', async () => {
    const a = await kit.service();
    const sem = await a.acquire('mixed', { permits: 2 });
    const before = await kit.rawLocks();
    await expect(a.acquire('mixed', { permits: 3 })).rejects.toThrow(
      /mixed.*semaphore of 2 permits/,
    );
    await expect(a.acquire('mixed', { mode: 'shared' })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(a.acquire('mixed')).rejects.toBeInstanceOf(InvalidLockOptionsError);
    expect(await kit.rawLocks()).toEqual(before);
    await sem.release();
    const excl = await a.acquire('mixed');
    await expect(a.acquire('mixed', { permits: 2 })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await excl.release();
  });

  it('validates mode, permits and weight before anything is sent', async () => {
    const a = await kit.service();
    await expect(a.acquire('v', { permits: 0 })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(a.acquire('v', { permits: 2, weight: 3 })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(a.acquire('v', { weight: 1 })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(a.acquire('v', { mode: 'read' as 'shared' })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(a.acquire('v', { mode: 'shared', permits: 2 })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
  });

  it('a shared holder renews and its lease ends by itself when it stops renewing', async () => {
    const a = await kit.service();
    const r = await a.acquire('lease', { mode: 'shared', ttlMs: 1_000, renew: false });
    await r.extend(1_500);
    const started = Date.now();
    const w = await a.acquire('lease', { timeoutMs: 10_000 });
    expect(Date.now() - started).toBeGreaterThan(800);
    expect(r.lost || r.signal.aborted).toBe(true);
    await w.release();
    await expect(r.release()).rejects.toBeDefined();
  });

  it('tryAcquire of a full semaphore reports when to retry', async () => {
    const a = await kit.service();
    const held = await a.acquire('partner', { permits: 1, ttlMs: 5_000 });
    const error = await a.acquire('partner', { permits: 1, timeoutMs: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(3_000);
    await held.release();
  });

  it('inspect reports the mode, the permits, every holder (never a token) and how many wait', async () => {
    const a = await kit.service({ holderId: 'inspector-a' });
    const b = await kit.service({ holderId: 'inspector-b' });
    const one = await a.acquire('inspected', { permits: 3, weight: 2, ttlMs: 20_000 });
    const two = await b.acquire('inspected', { permits: 3, ttlMs: 10_000 });
    const waiting = b.acquire('inspected', { permits: 3, weight: 2, timeoutMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const state = await a.inspect('inspected');
    expect(state).toMatchObject({ held: true, mode: 'semaphore', permits: 3, waiting: 1 });
    expect(
      state?.holders.map(({ holderId, weight, fence }) => ({ holderId, weight, fence })),
    ).toEqual([
      { holderId: 'inspector-a', weight: 2, fence: one.fence },
      { holderId: 'inspector-b', weight: 1, fence: two.fence },
    ]);
    expect(state?.remainingMs).toBeGreaterThan(15_000);
    expect(
      JSON.stringify(state, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
    ).not.toContain('e:');
    await one.release();
    const third = await waiting;
    await Promise.all([two.release(), third.release()]);
    expect(await a.inspect('inspected')).toMatchObject({
      held: false,
      mode: null,
      holders: [],
      waiting: 0,
    });
  });

  it('a waiting exclusive holder is not overtaken by shared holders that come later, in any process', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const reader = await a.acquire('fair', { mode: 'shared' });
    const writer = b.acquire('fair', { timeoutMs: 10_000 });
    // The writer's join landed: it waits in line behind the reader.
    await eventually(async () => (await a.inspect('fair'))?.waiting === 1);
    // A later reader, here or elsewhere, waits behind the writer although only readers hold.
    await expect(a.tryAcquire('fair', { mode: 'shared' })).resolves.toBeNull();
    const laterReader = a.acquire('fair', { mode: 'shared', timeoutMs: 10_000 });
    await reader.release();
    const w = await writer;
    await expect(
      Promise.race([
        laterReader.then(() => 'reader'),
        new Promise((r) => setTimeout(() => r('waiting'), 200)),
      ]),
    ).resolves.toBe('waiting');
    await w.release();
    await (await laterReader).release();
  });

  it('a waiter that gives up leaves the line at once', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const reader = await a.acquire('withdrawn', { mode: 'shared' });
    // A join answered after the deadline fails the wait as unavailable: b's pool connection is
    // opened first, and the wait is long enough for the join's reply on a loaded machine.
    await b.inspect('withdrawn');
    await expect(b.acquire('withdrawn', { timeoutMs: 1_000 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await a.inspect('withdrawn'))?.waiting).toBe(0);
    const second = await a.tryAcquire('withdrawn', { mode: 'shared' });
    expect(second).not.toBeNull();
    await Promise.all([reader.release(), second?.release()]);
  });

  it('releaseScope frees shared and permit holders here and elsewhere, and counts each', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const here = await a.acquire('scoped-r', { mode: 'shared', scope: 'tenant:1' });
    const there = await b.acquire('scoped-r', {
      mode: 'shared',
      scope: 'tenant:1',
      ttlMs: 2_000,
      renew: true,
    });
    const permit = await b.acquire('scoped-s', {
      permits: 2,
      scope: 'tenant:1',
      ttlMs: 2_000,
      renew: true,
    });
    const other = await b.acquire('scoped-s', { permits: 2, scope: 'tenant:2' });
    expect(await a.releaseScope('tenant:1')).toBe(3);
    expect(here.signal.aborted).toBe(true);
    // Told when their instance hears the command (else at their next renewal).
    for (const handle of [there, permit]) {
      await new Promise<void>((resolve) =>
        handle.signal.aborted
          ? resolve()
          : handle.signal.addEventListener('abort', () => resolve()),
      );
    }
    expect(other.lost).toBe(false);
    expect((await a.inspect('scoped-s'))?.holders).toHaveLength(1);
    await other.release();
  });

  it('waits for a shared release by polling when change streams are off', async () => {
    const a = await kit.service({
      changeStreams: 'off',
      pollIntervalMs: 50,
      maxPollIntervalMs: 200,
    });
    const b = await kit.service();
    const reader = await b.acquire('polled', { mode: 'shared' });
    const writer = a.acquire('polled', { timeoutMs: 10_000 });
    setTimeout(() => void reader.release(), 300);
    const w = await writer;
    expect(w.fence).toBeGreaterThan(reader.fence);
    await w.release();
  });

  it("runs a shared holder's work in a transaction that commits only while the lease is held", async () => {
    const client = await kit.client();
    const a = await kit.service({ client });
    const marks = client
      .db((kit as unknown as { mongo: { dbName: string } }).mongo.dbName)
      .collection('marks');
    await a.withLock(
      'tx-shared',
      async (handle) => {
        expect(handle.mode).toBe('shared');
        await marks.insertOne({ _id: 'ok' as never }, { session: handle.session });
      },
      { mode: 'shared', transaction: true },
    );
    expect(await marks.countDocuments({ _id: 'ok' as never })).toBe(1);
    await expect(
      a.withLock(
        'tx-shared',
        async (handle) => {
          await marks.insertOne({ _id: 'lost' as never }, { session: handle.session });
          expect(await a.releaseScope('tx')).toBe(1);
        },
        { mode: 'shared', transaction: true, scope: 'tx' },
      ),
    ).rejects.toBeDefined();
    expect(await marks.countDocuments({ _id: 'lost' as never })).toBe(0);
  });

  it('wakes waiters on each holder entry release from another process, not by their renewals', async () => {
    // A missed wake-up would leave the waiter to its next renewal (a third of its 30 s lease)
    // and time it out.
    const waiting = await kit.service();
    const holding = await kit.service();
    const reader = await holding.acquire('woken', { mode: 'shared', ttlMs: 60_000 });
    const permit = await holding.acquire('woken-s', { permits: 1, ttlMs: 60_000 });
    const writer = waiting.acquire('woken', { timeoutMs: 5_000 });
    const single = waiting.acquire('woken-s', { permits: 1, timeoutMs: 5_000 });
    // Both in line: the releases can reach them only as news.
    await eventually(async () => (await holding.inspect('woken'))?.waiting === 1);
    await eventually(async () => (await holding.inspect('woken-s'))?.waiting === 1);
    await Promise.all([reader.release(), permit.release()]);
    const [w, s] = await Promise.all([writer, single]);
    await Promise.all([w.release(), s.release()]);
  });

  it('events$ reports the first shared grant of a new key; the document releaseScope left idle goes after idleRetentionMs', async () => {
    const a = await kit.service();
    const seen: string[] = [];
    const subscription = a.events$.subscribe((event) => {
      if (event.key === 'first-shared') seen.push(event.type);
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const reader = await a.acquire('first-shared', {
      mode: 'shared',
      scope: 'gc',
      ttlMs: 2_000,
      renew: false,
    });
    expect(await a.releaseScope('gc')).toBe(1);
    expect(reader.lost).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 500));
    subscription.unsubscribe();
    expect(seen).toEqual(['acquired', 'released']);
    const raw = (await kit.rawLocks()).find((doc) => doc._id === 'first-shared');
    expect(raw?.line).toEqual([]);
    // The join set gcAt past its lease plus idleRetentionMs (default a day).
    expect((raw?.gcAt as Date).getTime()).toBeGreaterThan(Date.now() + 23 * 3_600_000);
  });

  it('a shared holder revoked elsewhere learns it at release, which writes nothing', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const reader = await a.acquire('revoked', { mode: 'shared', scope: 'gone', ttlMs: 30_000 });
    expect(await b.releaseScope('gone')).toBe(1);
    const before = await kit.rawLocks();
    await expect(reader.release()).rejects.toBeInstanceOf(LockLostError);
    expect(await kit.rawLocks()).toEqual(before);
  });

  // retryAfterMs is the time until the request could hold as far as the holders' leases tell
  // (docs/engine-v2.md), and holderId the holder whose lease end that is. The short leases end
  // 10 s from their grant, the long ones 40 s: over 10 s left can only be a long one's.
  describe('tells a refused request to retry when it could hold, naming the holder it waits for', () => {
    const SHORT_MS = 10_000;
    const LONG_MS = 40_000;
    const refusal = async (attempt: Promise<unknown>) => {
      const error = await attempt.catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      const { retryAfterMs, holderId } = error as LockNotAcquiredError;
      return { retryAfterMs: retryAfterMs!, holderId };
    };

    it('an exclusive request behind shared holders: the last of their leases', async () => {
      const short = await kit.service({ holderId: 'reader-short' });
      const long = await kit.service({ holderId: 'reader-long' });
      const writer = await kit.service();
      const options = { mode: 'shared', renew: false } as const;
      const held = [
        await short.acquire('retry-shared', { ...options, ttlMs: SHORT_MS }),
        await long.acquire('retry-shared', { ...options, ttlMs: LONG_MS }),
      ];
      for (const timeoutMs of [0, 300]) {
        const refused = await refusal(writer.acquire('retry-shared', { timeoutMs }));
        expect(refused.holderId).toBe('reader-long');
        expect(refused.retryAfterMs).toBeGreaterThan(SHORT_MS);
        expect(refused.retryAfterMs).toBeLessThanOrEqual(LONG_MS);
      }
      await Promise.all(held.map((handle) => handle.release()));
    });

    it('a semaphore request: when enough holders have ended to free its weight', async () => {
      const long = await kit.service({ holderId: 'permit-long' });
      const short = await kit.service({ holderId: 'permit-short' });
      const other = await kit.service();
      const options = { permits: 2, renew: false } as const;
      const held = [
        await long.acquire('retry-permits', { ...options, ttlMs: LONG_MS }),
        await short.acquire('retry-permits', { ...options, ttlMs: SHORT_MS }),
      ];
      for (const timeoutMs of [0, 300]) {
        const one = await refusal(other.acquire('retry-permits', { ...options, timeoutMs }));
        expect(one.holderId).toBe('permit-short');
        expect(one.retryAfterMs).toBeGreaterThan(0);
        expect(one.retryAfterMs).toBeLessThanOrEqual(SHORT_MS);
        // Two permits free only once both holders have ended.
        const both = await refusal(
          other.acquire('retry-permits', { ...options, weight: 2, timeoutMs }),
        );
        expect(both.holderId).toBe('permit-long');
        expect(both.retryAfterMs).toBeGreaterThan(SHORT_MS);
        expect(both.retryAfterMs).toBeLessThanOrEqual(LONG_MS);
      }
      await Promise.all(held.map((handle) => handle.release()));
    });
  });
});
