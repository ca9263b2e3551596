import { firstValueFrom } from 'rxjs';
import { LockService } from '../../lib';
import { InvalidLockOptionsError, LockLostError } from '../../lib/errors';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { startTestingModule } from '../testing/testing-kit';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { removedWhileTakingSeveralKeys } from './operator-removal-scenario';
import { eventually, LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

// A lease of 60 s renews a waiting entry at 20 s: a removed waiter that waited for that
// renewal to notice would miss its 15 s timeout.
const waitOptions = { scope: 'S', ttlMs: 60_000, timeoutMs: 15_000 };

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
    // Elsewhere: the key is free at once (the waiter gets it), the holder is told when its
    // process hears the command (or at its next renewal).
    const next = await waiter;
    expect(next.fence).toBeGreaterThan(elsewhere.fence);
    await eventually(() => elsewhere.signal.aborted);
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

  it('a waiter of the scope elsewhere joins again at once, and gets the key when it frees', async () => {
    const a = await kit.service({ holderId: 'A' });
    const c = await kit.service({ holderId: 'C' });
    const holder = await a.acquire('rejoin:1', { ttlMs: 60_000 });
    const waiting = c.acquire('rejoin:1', waitOptions);
    await eventually(async () => (await a.inspect('rejoin:1'))?.waiting === 1);
    // The waiting entry's fence number, as the line stores it.
    const waiterFence = async () => {
      const doc = (await kit.rawLocks()).find((candidate) => candidate._id === 'rejoin:1');
      const entry = (doc?.line as { h: string; f: number }[]).find(({ h }) => h === 'C');
      return entry === undefined ? undefined : Number(entry.f);
    };
    const joined = (await waiterFence()) as number;
    expect(await a.releaseScope('S')).toBe(0);
    // Back in line under a new entry (a later fence), before the key frees.
    await eventually(async () => ((await waiterFence()) ?? 0) > joined);
    expect((await a.inspect('rejoin:1'))?.waiting).toBe(1);
    await holder.release();
    const handle = await waiting;
    expect(await a.inspect('rejoin:1')).toMatchObject({ holderId: 'C', fence: handle.fence });
    await handle.release();
  });

  it('a call of several keys here that held one it removed takes that key again', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const other = await a.acquire('several:z', { ttlMs: 60_000 });
    // Keys are taken in sorted order: B holds several:k, then waits for several:z.
    const both = b.acquire(['several:k', 'several:z'], waitOptions);
    await eventually(async () => (await b.inspect('several:k'))?.holderId === 'B');
    await eventually(async () => (await b.inspect('several:z'))?.waiting === 1);
    const removedFence = (await b.inspect('several:k'))?.fence as bigint;
    expect(await b.releaseScope('S')).toBe(1);
    await other.release();
    const handle = await both;
    // Not the removed entry, which another process could have taken meanwhile.
    expect(handle.fences.get('several:k')).toBeGreaterThan(removedFence);
    for (const key of ['several:k', 'several:z']) {
      expect(await b.inspect(key)).toMatchObject({ holderId: 'B', fence: handle.fences.get(key) });
    }
    await handle.release();
  });

  it('a call of several keys in another instance that held one it removed takes that key again', () =>
    removedWhileTakingSeveralKeys(kit, 'several', waitOptions, async (operator) => {
      expect(await operator.releaseScope('S')).toBe(1);
    }));

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

describeWithFailPoints('releaseScope() with its command in flight', () => {
  const kit = LockTestKit.forSuite();
  const { delayNext, appClient } = faultTools(kit);

  it("holds back its holders' leaves here until the command lands: a waiter of the scope elsewhere is never handed the key", async () => {
    const client = await appClient('scope-first');
    const b = await kit.service({ client, holderId: 'B' });
    const c = await kit.service({ holderId: 'C' });
    const d = await kit.service({ holderId: 'D' });
    await b.acquire('scope-first', { scope: 'S', ttlMs: 60_000 });
    let scopeWaiterSettled = false;
    const scopeWaiter = c.acquire('scope-first', waitOptions).finally(() => {
      scopeWaiterSettled = true;
    });
    await eventually(async () => (await d.inspect('scope-first'))?.waiting === 1);
    const other = d.acquire('scope-first', { ttlMs: 60_000, timeoutMs: 15_000 });
    await eventually(async () => (await d.inspect('scope-first'))?.waiting === 2);
    // The command's read runs 600 ms late: a leave of B's sent meanwhile would land first.
    await delayNext('scope-first', 'find', 600);
    expect(await b.releaseScope('S')).toBe(1);
    const next = await other;
    // The scope's waiter lost its place (behind D now); it was never handed the key.
    expect(scopeWaiterSettled).toBe(false);
    expect((await d.inspect('scope-first'))?.holderId).toBe('D');
    await eventually(async () => (await d.inspect('scope-first'))?.waiting === 1);
    await next.release();
    const last = await scopeWaiter;
    expect(last.fence).toBeGreaterThan(next.fence);
    await last.release();
  });

  it('tells a holder here whose wait ended meanwhile and whose entry the command removed', async () => {
    const a = await kit.service({ holderId: 'A' });
    const client = await appClient('scope-late');
    const b = await kit.service({ client, holderId: 'B' });
    const holder = await a.acquire('scope-late', { ttlMs: 60_000 });
    const waiting = b.acquire('scope-late', { scope: 'S', ttlMs: 60_000, timeoutMs: 15_000 });
    await eventually(async () => (await a.inspect('scope-late'))?.waiting === 1);
    // B's next lock write, the command's, runs 1.5 s late; B's wait ends before it lands.
    await delayNext('scope-late', 'findAndModify', 1_500);
    const releasing = b.releaseScope('S');
    await sleep(150);
    await holder.release();
    const held = await waiting;
    expect(held.lost).toBe(false);
    expect(await releasing).toBe(1);
    // Told now, not at its renewal twenty seconds on.
    expect(held.lost).toBe(true);
    expect(held.signal.reason).toBeInstanceOf(LockLostError);
    await held.release().catch(() => undefined);
  });
});
