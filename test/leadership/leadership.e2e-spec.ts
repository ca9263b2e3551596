import { firstValueFrom, filter, take, toArray, type Subscription } from 'rxjs';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  InvalidLockOptionsError,
  LeadershipResignedError,
  LockLostError,
  LockNotAcquiredError,
  LockServiceClosedError,
} from '../../lib/errors';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import type { LeaderInfo } from '../../lib/leadership/leader-watch';
import type { LeaderTerm } from '../../lib/leadership/leader-term';
import { eventually, LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

describe('Leadership', () => {
  const kit = LockTestKit.forSuite();

  it('elects one instance; another waits in line and is elected with a larger fence when it resigns', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const first = await a.leadership('billing', { ttlMs: 2_000 }).campaign();
    expect(a.leadership('billing').isLeader).toBe(true);
    expect(first.name).toBe('billing');
    await expect(b.leadership('billing').campaign({ timeoutMs: 200 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    expect(b.leadership('billing').isLeader).toBe(false);

    const second = b.leadership('billing').campaign();
    // The resigning leader's signal aborts before the next one can be elected.
    let abortedWhileNobodyElse = false;
    first.signal.addEventListener('abort', () => {
      abortedWhileNobodyElse = !b.leadership('billing').isLeader;
    });
    await first.resign();
    expect(abortedWhileNobodyElse).toBe(true);
    expect(first.active).toBe(false);
    expect(a.leadership('billing').isLeader).toBe(false);
    const term = await second;
    expect(term.fence).toBeGreaterThan(first.fence);
    expect(b.leadership('billing').term).toBe(term);
    await term.resign();
  });

  it('serves candidates in the order they stood', async () => {
    const [a, b, c] = await Promise.all(
      ['A', 'B', 'C'].map((holderId) => kit.service({ holderId })),
    );
    const leading = await a.leadership('order').campaign();
    const waiting = async () => (await a.inspect(`${LEADER_KEY_PREFIX}order`))?.waiting;
    const elected: string[] = [];
    const bTerm = b
      .leadership('order')
      .campaign()
      .then((term) => (elected.push('B'), term));
    // b stands in line before c does, and c behind it before the leader resigns.
    await eventually(async () => (await waiting()) === 1);
    const cTerm = c
      .leadership('order')
      .campaign()
      .then((term) => (elected.push('C'), term));
    await eventually(async () => (await waiting()) === 2);
    await leading.resign();
    await eventually(() => elected.length > 0);
    expect(elected).toEqual(['B']);
    await (await bTerm).resign();
    await (await cTerm).resign();
    expect(elected).toEqual(['B', 'C']);
  });

  it('campaign calls of one instance share its place, and giving up the last one leaves the line', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const held = await a.leadership('shared-place').campaign();
    const aborter = new AbortController();
    const first = b.leadership('shared-place').campaign({ signal: aborter.signal });
    const second = b.leadership('shared-place').campaign({ timeoutMs: 150 });
    await expect(second).rejects.toBeInstanceOf(LockNotAcquiredError);
    aborter.abort(new Error('gave up'));
    await expect(first).rejects.toThrow('gave up');
    await held.resign();
    // Nobody of b is in line any more: the key stays free.
    await sleep(200);
    expect(b.leadership('shared-place').isLeader).toBe(false);
    expect((await a.inspect(`${LEADER_KEY_PREFIX}shared-place`))?.held).toBe(false);
  });

  it('a campaign whose signal was aborted already is refused, also while this instance leads', async () => {
    const a = await kit.service();
    const leadership = a.leadership('aborted-caller');
    const gaveUp = AbortSignal.abort(new Error('caller gave up'));
    await expect(leadership.campaign({ signal: gaveUp })).rejects.toThrow('caller gave up');
    const subscription = leadership.terms$.subscribe();
    await eventually(() => leadership.isLeader);

    await expect(leadership.campaign({ signal: gaveUp })).rejects.toThrow('caller gave up');

    // Not given to that caller, the term ends with the last terms$ subscriber.
    subscription.unsubscribe();
    await eventually(() => !leadership.isLeader);
  });

  it('a campaign waiting as the service closes rejects with LockServiceClosedError', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const held = await a.leadership('closing-wait').campaign();
    const waiting = b.leadership('closing-wait').campaign();
    await eventually(
      async () => (await a.inspect(`${LEADER_KEY_PREFIX}closing-wait`))?.waiting === 1,
    );

    await b.close();

    await expect(waiting).rejects.toBeInstanceOf(LockServiceClosedError);
    await held.resign();
  });

  it('leader$ tells any instance who leads, including when a lease runs out without an event', async () => {
    const observer = await kit.service({ holderId: 'observer' });
    const a = await kit.service({ holderId: 'A' });
    const seen: (LeaderInfo | null)[] = [];
    const subscription = observer
      .leadership('watched')
      .leader$.subscribe((info) => seen.push(info));
    await waitFor(() => seen.length === 1);
    expect(seen[0]).toBeNull();

    const term = await a.leadership('watched').campaign();
    await waitFor(() => seen.length === 2);
    expect(seen[1]).toMatchObject({ holderId: 'A', fence: term.fence });
    expect(seen[1]?.since).toBeInstanceOf(Date);
    await term.resign();
    await waitFor(() => seen.length === 3);
    expect(seen[2]).toBeNull();

    // A holder that stops renewing: no write marks the end of its lease.
    const stale = await a.acquire(`${LEADER_KEY_PREFIX}watched`, { ttlMs: 1_000 });
    await waitFor(() => seen.length === 4);
    expect(seen[3]).toMatchObject({ holderId: 'A', fence: stale.fence });
    await waitFor(() => seen.length === 5, 3_000);
    expect(seen[4]).toBeNull();
    subscription.unsubscribe();
  });

  it('leader$ polls when change events do not flow (changeStreams off, as on a standalone server)', async () => {
    const observer = await kit.service({ changeStreams: 'off', maxPollIntervalMs: 200 });
    const a = await kit.service({ holderId: 'A' });
    const seen: (LeaderInfo | null)[] = [];
    const subscription = observer.leadership('polled').leader$.subscribe((info) => seen.push(info));
    await waitFor(() => seen.length === 1);
    const term = await a.leadership('polled').campaign();
    await waitFor(() => seen.length === 2, 2_000);
    expect(seen[1]).toMatchObject({ holderId: 'A', fence: term.fence });
    await term.resign();
    await waitFor(() => seen.length === 3, 2_000);
    expect(seen[2]).toBeNull();
    subscription.unsubscribe();
  });

  it('terms$ campaigns while subscribed; unsubscribing resigns and the next subscriber leads', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const aTerms: LeaderTerm[] = [];
    const subscriptionA = a.leadership('projector').terms$.subscribe((term) => aTerms.push(term));
    await waitFor(() => aTerms.length === 1);
    const bTerm = firstValueFrom(b.leadership('projector').terms$);
    await sleep(100);
    subscriptionA.unsubscribe();
    const elected = await bTerm;
    expect(aTerms[0].signal.reason).toBeInstanceOf(LeadershipResignedError);
    expect(elected.fence).toBeGreaterThan(aTerms[0].fence);
    // firstValueFrom unsubscribed: b resigned too.
    await waitFor(() => !b.leadership('projector').isLeader);
  });

  it('a lost term aborts its signal, emits on lost$, and terms$ campaigns again for a new term', async () => {
    const a = await kit.service({ holderId: 'A' });
    const terms: LeaderTerm[] = [];
    const subscription: Subscription = a
      .leadership('lossy', { ttlMs: 2_000 })
      .terms$.subscribe((term) => terms.push(term));
    await waitFor(() => terms.length === 1);
    const lost = firstValueFrom(terms[0].lost$);
    await a.releaseAllHeld();
    await expect(lost).resolves.toBeInstanceOf(LockLostError);
    expect(terms[0].signal.aborted).toBe(true);
    // Aborted with the loss itself, at once (not only once the lock is let go).
    expect(terms[0].signal.reason).toBeInstanceOf(LockLostError);
    await waitFor(() => terms.length === 2);
    expect(terms[1].fence).toBeGreaterThan(terms[0].fence);
    subscription.unsubscribe();
  });

  it('shutdown resigns first: a candidate elsewhere is elected at once, not at the lease end', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const term = await a.leadership('handover', { ttlMs: 30_000 }).campaign();
    const next = b.leadership('handover', { ttlMs: 30_000 }).campaign();
    await sleep(100);
    const closedAt = performance.now();
    await a.close();
    expect(term.signal.reason).toBeInstanceOf(LockServiceClosedError);
    await next;
    expect(performance.now() - closedAt).toBeLessThan(10_000);
    await expect(a.leadership('handover').campaign()).rejects.toThrow();
  });

  it('refuses bad names, a second ttlMs for one name, and a bad timeoutMs', async () => {
    const a = await kit.service();
    expect(() => a.leadership('')).toThrow(InvalidLockOptionsError);
    expect(() => a.leadership('x'.repeat(600))).toThrow(InvalidLockOptionsError);
    expect(() => a.leadership('nul\0name')).toThrow();
    expect(() => a.leadership('ttl', { ttlMs: 1 })).toThrow(InvalidLockOptionsError);
    a.leadership('ttl', { ttlMs: 5_000 });
    expect(() => a.leadership('ttl', { ttlMs: 6_000 })).toThrow(/already exists/);
    expect(a.leadership('ttl')).toBe(a.leadership('ttl', { ttlMs: 5_000 }));
    await expect(a.leadership('ttl').campaign({ timeoutMs: -1 })).rejects.toThrow(/timeoutMs/);
  });

  it('reports leadership per name it stands for in leading (not names only watched)', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const term = await a.leadership('reported').campaign();
    a.leadership('only-watched');
    const held = await b.leadership('in-line').campaign();
    const waiting = a.leadership('in-line').campaign();
    await sleep(50);
    expect([...a.leading]).toEqual([
      ['reported', true],
      ['in-line', false],
    ]);
    await term.resign();
    await held.resign();
    await (await waiting).resign();
    expect([...a.leading]).toEqual([]);
    const leaders = await firstValueFrom(
      a.leadership('reported').leader$.pipe(
        filter((info) => info === null),
        take(1),
        toArray(),
      ),
    );
    expect(leaders).toEqual([null]);
  });
});

async function waitFor(condition: () => boolean, withinMs = 5_000): Promise<void> {
  const endsAt = performance.now() + withinMs;
  while (!condition()) {
    if (performance.now() > endsAt) throw new Error('condition not met in time');
    await sleep(10);
  }
}
