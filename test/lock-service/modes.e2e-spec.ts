import { InvalidLockOptionsError, LockNotAcquiredError } from '../../lib/errors';
import { LockTestKit } from './lock-test-kit';

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
    await one.release();
    await expect(a.tryAcquire('exports', { permits: 3 })).resolves.toBeNull(); // room is reserved
    await two.release();
    const wide = await waiting;
    const narrow = await b.acquire('exports', { permits: 3 });
    await Promise.all([wide.release(), narrow.release()]);
  });

  it('refuses a key used in another form, naming it, and writes nothing', async () => {
    const a = await kit.service();
    const sem = await a.acquire('mixed', { permits: 2 });
    const before = await a.inspect('mixed');
    await expect(a.acquire('mixed', { permits: 3 })).rejects.toThrow(/mixed.*semaphore of 2 permits/);
    await expect(a.acquire('mixed', { mode: 'shared' })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(a.acquire('mixed')).rejects.toBeInstanceOf(InvalidLockOptionsError);
    expect(await a.inspect('mixed')).toEqual(before);
    await sem.release();
    const excl = await a.acquire('mixed');
    await expect(a.acquire('mixed', { permits: 2 })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await excl.release();
  });

  it('validates mode, permits and weight before anything is sent', async () => {
    const a = await kit.service();
    await expect(a.acquire('v', { permits: 0 })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(a.acquire('v', { permits: 2, weight: 3 })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(a.acquire('v', { weight: 1 })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(a.acquire('v', { mode: 'read' as 'shared' })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(a.acquire('v', { mode: 'shared', permits: 2 })).rejects.toBeInstanceOf(InvalidLockOptionsError);
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
});
