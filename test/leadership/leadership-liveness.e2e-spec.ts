import type { Subscription } from 'rxjs';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import { LockStoreUnavailableError } from '../../lib/errors/lock-store-unavailable.error';
import { LockServiceClosedError } from '../../lib/errors/lock-service-closed.error';
import type { LeaderTerm } from '../../lib/leadership/leader-term';
import type { Leadership } from '../../lib/leadership/leadership';
import { passThrough } from '../support/fault-proxy';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { proxiedServices } from './proxied-services';
import { eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(30_000);

describe('leadership: leadership liveness', () => {
  const kit = LockTestKit.forSuite();

  const proxies = proxiedServices(kit, 500);
  const proxied = (extra = {}) => proxies.service(extra);

  for (const how of ['timeout', 'abort'] as const) {
    it(`a candidate that gave up (${how}) leaves no stale place: the next one is elected at once`, async () => {
      const a = await kit.service({ holderId: 'A' });
      const b = await kit.service({ holderId: 'B' });
      const c = await kit.service({ holderId: 'C' });
      const held = await a.leadership(`stale-${how}`, { ttlMs: 10_000 }).campaign();
      const aborter = new AbortController();
      const giving = b
        .leadership(`stale-${how}`, { ttlMs: 10_000 })
        .campaign(how === 'timeout' ? { timeoutMs: 200 } : { signal: aborter.signal })
        .catch(() => undefined);
      if (how === 'abort') setTimeout(() => aborter.abort(new Error('gave up')), 200);
      await giving;
      const next = c.leadership(`stale-${how}`, { ttlMs: 10_000 }).campaign();
      await sleep(100);
      const resignedAt = performance.now();
      await held.resign();
      const term = await next;
      // A stale place ahead of c would hold the key until b's 10 s lease ran out.
      expect(performance.now() - resignedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
      await term.resign();
    });
  }

  it('terms$ unsubscribed while campaigning leaves the line; resubscribed at once, campaigns again', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const held = await a.leadership('resub').campaign();
    const terms: LeaderTerm[] = [];
    let sub: Subscription = b.leadership('resub').terms$.subscribe((t) => terms.push(t));
    await sleep(50);
    sub.unsubscribe();
    sub = b.leadership('resub').terms$.subscribe((t) => terms.push(t));
    await sleep(50);
    await held.resign();
    await eventually(() => terms.length === 1, 3_000);
    sub.unsubscribe();
    await eventually(() => !b.leadership('resub').isLeader);
    await sleep(200);
    expect((await a.inspect(`${LEADER_KEY_PREFIX}resub`))?.held).toBe(false);
  });

  it('resign() while MongoDB is unreachable is bounded, and the next candidate leads within the lease', async () => {
    const a = await proxied({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const term = await a.leadership('down', { ttlMs: 2_000 }).campaign();
    const next = b.leadership('down', { ttlMs: 2_000 }).campaign();
    await sleep(100);
    proxies.proxy.setMode({ blackHole: 'drop' });
    const startedAt = performance.now();
    await term.resign();
    expect(term.signal.aborted).toBe(true);
    expect(performance.now() - startedAt).toBeLessThan(2_000);
    const elected = await next;
    expect(performance.now() - startedAt).toBeLessThan(4_000);
    proxies.proxy.setMode(passThrough);
    await elected.resign();
  });

  for (const timeoutMs of [0, 1_000]) {
    it(`campaign({ timeoutMs: ${timeoutMs} }) gives up while MongoDB is unreachable`, async () => {
      const a = await proxied({ holderId: 'A' });
      const leadership = a.leadership(`unreachable-${timeoutMs}`, { ttlMs: 2_000 });
      proxies.proxy.setMode({ blackHole: 'drop' });
      const startedAt = performance.now();
      // The join is never answered: the timeout runs once a try's reply would have been late.
      const outcome = await leadership.campaign({ timeoutMs }).catch((error: unknown) => error);
      const tookMs = performance.now() - startedAt;
      proxies.proxy.setMode(passThrough);
      await leadership.resign();
      // As acquire and tryAcquire: MongoDB's silence, not a refusal (outages-and-shutdown.md).
      expect(outcome).toBeInstanceOf(LockStoreUnavailableError);
      expect(tookMs).toBeLessThan(timeoutMs + 2_000 + LOAD_SLACK_MS);
    });
  }

  it('a term resigned while MongoDB is unreachable is not reported lost on lost$', async () => {
    const a = await proxied({ holderId: 'A' });
    const term = await a.leadership('resigned-lost', { ttlMs: 2_000 }).campaign();
    const lost: string[] = [];
    let completed = false;
    term.lost$.subscribe({
      next: (error) => lost.push(error.message),
      complete: () => (completed = true),
    });
    proxies.proxy.setMode({ blackHole: 'drop' });
    await term.resign();
    // Past the lease: the release MongoDB never confirmed ends with it.
    await eventually(() => completed, 6_000);
    proxies.proxy.setMode(passThrough);
    expect(lost).toEqual([]);
  });

  it('a candidate that resigns at once does not win again while another stands in line', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const elected: string[] = [];
    const subscriptions: Subscription[] = [];
    // A leads 100 ms a term, then resigns and stands again.
    subscriptions.push(
      a.leadership('rotating', { ttlMs: 5_000 }).terms$.subscribe((term) => {
        elected.push('A');
        setTimeout(() => void term.resign(), 100);
      }),
    );
    await eventually(() => a.leadership('rotating').isLeader);
    // B hands every term it wins straight back.
    subscriptions.push(
      b.leadership('rotating', { ttlMs: 5_000 }).terms$.subscribe((term) => {
        elected.push('B');
        void term.resign();
      }),
    );
    await eventually(async () => (await a.inspect(`${LEADER_KEY_PREFIX}rotating`))?.waiting === 1);
    await sleep(1_000);
    subscriptions.forEach((subscription) => subscription.unsubscribe());
    // Each stands again in one write as its term ends, so terms alternate. B wins twice in a
    // row if its join lands before A's, as when A's pool opens a connection for it (the first
    // time); with a try before the join, B won three in a row every time; with A back in line
    // only once its leave was answered, twice.
    const runsOfB = elected.join('').split('A').slice(1, -1);
    expect(runsOfB.length).toBeGreaterThanOrEqual(4);
    expect(runsOfB.filter((run) => run.length > 1).length).toBeLessThanOrEqual(runsOfB.length / 4);
    expect(Math.max(...runsOfB.map((run) => run.length))).toBeLessThanOrEqual(2);
  });

  it('close() of a leader with MongoDB unreachable stays bounded', async () => {
    const a = await proxied({ holderId: 'A', shutdownGraceMs: 1_000 });
    const terms: LeaderTerm[] = [];
    a.leadership('close-down', { ttlMs: 30_000 }).terms$.subscribe((t) => terms.push(t));
    await eventually(() => terms.length === 1);
    proxies.proxy.setMode({ blackHole: 'drop' });
    const startedAt = performance.now();
    await a.close();
    // operationTimeoutMs (resign) + shutdownGraceMs + the close margin (1.5 s) + slack
    expect(performance.now() - startedAt).toBeLessThan(500 + 1_000 + 1_500 + 1_500);
    expect(terms[0].signal.aborted).toBe(true);
  });

  it('close() while campaigning (terms$, another leader) resolves promptly and leaves no candidate', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const held = await a.leadership('close-campaign').campaign();
    b.leadership('close-campaign').terms$.subscribe();
    const pending = b
      .leadership('close-campaign')
      .campaign()
      .catch((e: unknown) => e);
    await sleep(100);
    const startedAt = performance.now();
    await b.close();
    // A campaign close() does not end (a's term outlasts it) holds close() for the 5 s
    // operationTimeoutMs that bounds the leaderships' close.
    expect(performance.now() - startedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    expect(await pending).toBeInstanceOf(Error);
    await held.resign();
    await sleep(300);
    expect((await a.inspect(`${LEADER_KEY_PREFIX}close-campaign`))?.held).toBe(false);
  });

  it('a leadership first asked for after close() ends as one made before: terms$ completes, campaign() rejects', async () => {
    const a = await kit.service({ holderId: 'A' });
    const before = a.leadership('closed-before');
    await a.close();
    const outcome = (leadership: Leadership) =>
      new Promise<string>((resolve) => {
        leadership.terms$.subscribe({
          next: () => resolve('term'),
          error: (error: unknown) => resolve(`error ${String(error)}`),
          complete: () => resolve('completed'),
        });
        void sleep(3_000).then(() => resolve('nothing in 3 s'));
      });
    const outcomes = [outcome(before), outcome(a.leadership('closed-after'))];
    expect(await Promise.all(outcomes)).toEqual(['completed', 'completed']);
    expect([...a.leading]).toEqual([]);
    await expect(a.leadership('closed-after-2').campaign()).rejects.toBeInstanceOf(
      LockServiceClosedError,
    );
  });

  it('close() racing an election just won releases the key', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const key = `${LEADER_KEY_PREFIX}race-close`;
    const held = await a.leadership('race-close').campaign();
    const won: LeaderTerm[] = [];
    let closing: Promise<void> | undefined;
    // b closes in the same breath as its election is won: as its term is handed out.
    b.leadership('race-close').terms$.subscribe((term) => {
      won.push(term);
      closing ??= b.close();
    });
    await eventually(async () => (await a.inspect(key))?.waiting === 1);
    await held.resign();
    await eventually(() => closing !== undefined);
    await closing;
    // b did win, after a's term, and close() ended that term and left the key.
    expect(won).toHaveLength(1);
    expect(won[0].fence).toBeGreaterThan(held.fence);
    expect(won[0].active).toBe(false);
    expect((await a.inspect(key))?.held).toBe(false);
  });

  it('resign() then campaign() of one instance: the terms never overlap and fences increase', async () => {
    const a = await kit.service({ holderId: 'A' });
    const leadership = a.leadership('overlap');
    const first = await leadership.campaign();
    const resigning = first.resign();
    const second = await leadership.campaign();
    expect(first.active).toBe(false);
    expect(second.fence).toBeGreaterThan(first.fence);
    await resigning;
    expect(second.active).toBe(true);
    await second.resign();
  });
});
