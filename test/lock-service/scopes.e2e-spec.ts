import { firstValueFrom } from 'rxjs';
import { LockService } from '../../lib';
import { InvalidLockOptionsError, LockLostError } from '../../lib/errors';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { startTestingModule } from '../testing/testing-kit';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

describe('Owner scopes: releaseScope()', () => {
  const kit = LockTestKit.forSuite();

  it('releases every lock of the scope, here and in other instances, and nothing else', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const here = await a.acquire('cart:1', { scope: 'session:42' });
    const elsewhere = await b.acquire('cart:2', { scope: 'session:42', ttlMs: 2_000, renew: true });
    const otherScope = await b.acquire('cart:3', { scope: 'session:7' });
    const unscoped = await b.acquire('cart:4');
    const waiter = (await kit.service()).acquire('cart:2', { timeoutMs: 10_000 });

    expect(await a.releaseScope('session:42')).toBe(2);
    // Here: told at once.
    expect(here.lost).toBe(true);
    expect(here.signal.aborted).toBe(true);
    // Elsewhere: the key is free at once (the waiter gets it), the holder learns at its next renewal.
    const next = await waiter;
    expect(next.fence).toBeGreaterThan(elsewhere.fence);
    await new Promise<void>((resolve) =>
      elsewhere.signal.addEventListener('abort', () => resolve()),
    );
    expect(elsewhere.signal.reason).toBeInstanceOf(LockLostError);
    // Other scopes and unscoped locks are untouched.
    expect((await a.inspect('cart:3'))?.held).toBe(true);
    expect((await a.inspect('cart:4'))?.held).toBe(true);
    expect(otherScope.lost || unscoped.lost).toBe(false);
    expect(await a.releaseScope('session:42')).toBe(0);
    await Promise.all([next.release(), otherScope.release(), unscoped.release()]);
  });

  it('a scope released after its holder released counts nothing, and a new scoped lock is unaffected by an old call', async () => {
    const a = await kit.service();
    const lock = await a.acquire('job:1', { scope: 's' });
    await lock.release();
    expect(await a.releaseScope('s')).toBe(0);
    const again = await a.acquire('job:1');
    expect(await a.releaseScope('s')).toBe(0); // the new acquisition has no scope
    expect(again.lost).toBe(false);
    await again.release();
  });

  it('refuses a scope that is not a bounded string, and document locks refuse scopes', async () => {
    const a = await kit.service();
    await expect(a.acquire('k', { scope: '' })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(a.releaseScope('x'.repeat(201))).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(a.documents('docs').acquire('d', { scope: 's' })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
  });

  it('refuses a missing scope (a JavaScript caller) rather than releasing every unscoped lock', async () => {
    const a = await kit.service();
    const unscoped = await a.acquire('job:unscoped');
    for (const missing of [undefined, null]) {
      const outcome = await a.releaseScope(missing as unknown as string).catch((e: unknown) => e);
      expect(outcome).toBeInstanceOf(InvalidLockOptionsError);
      expect((outcome as InvalidLockOptionsError).option).toBe('scope');
    }
    expect(unscoped.lost).toBe(false);
    expect((await a.inspect('job:unscoped'))?.held).toBe(true);
    await unscoped.release();
  });

  it('works the same on the testing module (no MongoDB)', async () => {
    const moduleRef = await startTestingModule({ imports: [MongoLockTestingModule.forRoot()] });
    const locks = moduleRef.get(LockService);
    const store = moduleRef.get(LockTestingStore);
    const mine = await locks.acquire('a', { scope: 'tenant:1' });
    await store.holdAs('b', 'other-instance');
    expect(await locks.releaseScope('tenant:1')).toBe(1);
    expect(mine.lost).toBe(true);
    expect(await firstValueFrom(mine.lost$)).toBeInstanceOf(LockLostError);
    expect((await locks.inspect('b'))?.held).toBe(true);
    await moduleRef.close();
  });
});
