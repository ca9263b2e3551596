import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import type { LeaderTerm } from '../../lib/leadership/leader-term';
import { passThrough } from '../support/fault-proxy';
import { proxiedServices } from './proxied-services';
import { eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(30_000);

describe('leadership: leadership safety', () => {
  const kit = LockTestKit.forSuite();
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);

  beforeAll(() => process.on('unhandledRejection', onUnhandled));
  afterAll(() => process.off('unhandledRejection', onUnhandled));

  const proxies = proxiedServices(kit, 500);
  const proxied = (extra = {}) => proxies.service(extra);

  it('a leader cut off from MongoDB sees its signal abort before anyone else is elected', async () => {
    const a = await proxied({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const first = await a.leadership('cut-off', { ttlMs: 2_000 }).campaign();
    let abortedAt = Number.NaN;
    first.signal.addEventListener('abort', () => (abortedAt = performance.now()));
    const next = b.leadership('cut-off', { ttlMs: 2_000 }).campaign();
    await sleep(100);
    proxies.proxy.setMode({ blackHole: 'drop' });
    const second = await next;
    const electedAt = performance.now();
    expect(abortedAt).toBeLessThan(electedAt);
    expect(second.fence).toBeGreaterThan(first.fence);
    proxies.proxy.setMode(passThrough);
    await second.resign();
  });

  it('releaseAllHeld and forceRelease (local) end the term before another instance is elected', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const key = `${LEADER_KEY_PREFIX}revoked`;
    for (const revoke of [() => a.releaseAllHeld(), () => a.forceRelease(key)]) {
      const term = await a.leadership('revoked').campaign();
      let bLeadsAtAbort: boolean | undefined;
      term.signal.addEventListener(
        'abort',
        () => (bLeadsAtAbort = b.leadership('revoked').isLeader),
      );
      const next = b.leadership('revoked').campaign();
      // B must be in line before the revoke, or "B not leader at abort" would hold trivially.
      await eventually(async () => (await a.inspect(key))?.waiting === 1);
      await revoke();
      const elected = await next;
      expect(bLeadsAtAbort).toBe(false);
      expect(elected.fence).toBeGreaterThan(term.fence);
      await elected.resign();
    }
  });

  it('races of campaign, resign, terms$ and close leave no unhandled rejection and no held key', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    for (let i = 0; i < 10; i += 1) {
      const name = `race-${i}`;
      const held = await a.leadership(name).campaign();
      const terms: LeaderTerm[] = [];
      const sub = b.leadership(name).terms$.subscribe((t) => terms.push(t));
      const c1 = b
        .leadership(name)
        .campaign({ timeoutMs: 5 + i * 10 })
        .catch(() => undefined);
      const aborter = new AbortController();
      const c2 = b
        .leadership(name)
        .campaign({ signal: aborter.signal })
        .catch(() => undefined);
      await sleep(i * 7);
      void held.resign();
      if (i % 2) aborter.abort(new Error('x'));
      if (i % 3 === 0) sub.unsubscribe();
      void b.leadership(name).resign();
      await Promise.all([c1, c2]);
      sub.unsubscribe();
      await b.leadership(name).resign();
    }
    await b.close();
    await sleep(300);
    for (let i = 0; i < 10; i += 1) {
      expect((await a.inspect(`nestjs-mongo-lock:leader:race-${i}`))?.held).toBe(false);
    }
    await eventually(() => true);
    expect(unhandled).toEqual([]);
  });
});
