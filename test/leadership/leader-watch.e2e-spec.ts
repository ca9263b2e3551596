import type { LeaderInfo } from '../../lib/leadership/leader-watch';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import { passThrough } from '../support/fault-proxy';
import { proxiedServices } from './proxied-services';
import { eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

describe('leadership: leader$', () => {
  const kit = LockTestKit.forSuite();

  const proxies = proxiedServices(kit, 2_000);
  const proxied = (extra = {}) => proxies.service(extra);

  // Polling without change streams; engine v2 with them, where its own events carry the changes.
  it.each([
    ['v2', 'off'],
    ['v2', 'auto'],
  ] as const)('engine %s, changeStreams %s: sees every leader change', async (engine, streams) => {
    const observer = await kit.service({ holderId: 'observer', engine, changeStreams: streams });
    const a = await kit.service({ holderId: 'A', engine });
    const b = await kit.service({ holderId: 'B', engine });
    const seen: (LeaderInfo | null)[] = [];
    const sub = observer.leadership('polled').leader$.subscribe((info) => seen.push(info));
    await eventually(() => seen.length === 1);
    const termA = await a.leadership('polled', { ttlMs: 30_000 }).campaign();
    await eventually(() => seen.at(-1)?.holderId === 'A', 2_500);
    const next = b.leadership('polled', { ttlMs: 30_000 }).campaign();
    await termA.resign();
    const termB = await next;
    await eventually(() => seen.at(-1)?.holderId === 'B', 2_500);
    expect(seen.at(-1)?.fence).toBe(termB.fence);
    await termB.resign();
    await eventually(() => seen.at(-1) === null, 2_500);
    sub.unsubscribe();
    const count = seen.length;
    await a.leadership('polled').campaign();
    await sleep(1_500);
    expect(seen.length).toBe(count); // nothing after unsubscribe
  });

  it('sees an election that happens while its change stream is still opening', async () => {
    // The observer's commands see random latency, so its first inspect and the aggregate that
    // opens the change stream reach the server at different moments; B is elected in between.
    const b = await kit.service({ holderId: 'B' });
    let missed = 0;
    const trials = 5;
    for (let trial = 0; trial < trials; trial += 1) {
      const observer = await proxied({ holderId: `observer-${trial}` });
      proxies.proxy.setMode({ latency: { baseMs: 0, jitterMs: 400 } });
      const name = `opening-${trial}`;
      const seen: (LeaderInfo | null)[] = [];
      const sub = observer.leadership(name).leader$.subscribe((info) => seen.push(info));
      await sleep(150 + Math.random() * 200);
      const term = await b.leadership(name, { ttlMs: 30_000 }).campaign();
      try {
        await eventually(() => seen.at(-1)?.holderId === 'B', 3_000);
      } catch {
        missed += 1;
      }
      sub.unsubscribe();
      proxies.proxy.setMode(passThrough);
      await term.resign();
      await observer.close();
    }
    expect(missed).toBe(0);
  });

  it('reads again after inspect failures and reports the leader elected meanwhile', async () => {
    const observer = await proxied({ holderId: 'observer', operationTimeoutMs: 300 });
    const a = await kit.service({ holderId: 'A' });
    const seen: (LeaderInfo | null)[] = [];
    const sub = observer.leadership('flaky').leader$.subscribe((info) => seen.push(info));
    await eventually(() => seen.length === 1);
    proxies.proxy.setMode({ blackHole: 'drop' });
    const term = await a.leadership('flaky', { ttlMs: 30_000 }).campaign();
    await sleep(1_000);
    proxies.proxy.setMode(passThrough);
    await eventually(() => seen.at(-1)?.holderId === 'A', 6_000);
    sub.unsubscribe();
    await term.resign();
  });

  it("a candidate joining the line changes neither the leader's fence nor leader$", async () => {
    const observer = await kit.service({ holderId: 'observer' });
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const term = await a.leadership('standing', { ttlMs: 30_000 }).campaign();
    const seen: (LeaderInfo | null)[] = [];
    const sub = observer.leadership('standing').leader$.subscribe((info) => seen.push(info));
    await eventually(() => seen.length === 1);
    const candidate = b.leadership('standing', { ttlMs: 30_000 }).campaign();
    await eventually(async () => (await a.inspect(`${LEADER_KEY_PREFIX}standing`))?.waiting === 1);
    await sleep(500); // the candidate's join event has been read
    const state = await observer.inspect(`${LEADER_KEY_PREFIX}standing`);
    expect(state?.fence).toBe(term.fence);
    expect(seen).toEqual([{ holderId: 'A', fence: term.fence, since: expect.any(Date) }]);
    sub.unsubscribe();
    await term.resign();
    await (await candidate).resign();
  });

  it('since is the start of the term (not of the latest renewal)', async () => {
    const observer = await kit.service({ holderId: 'observer' });
    const a = await kit.service({ holderId: 'A' });
    const term = await a.leadership('since', { ttlMs: 1_500 }).campaign();
    await sleep(1_200); // at least one renewal
    const seen: (LeaderInfo | null)[] = [];
    const sub = observer.leadership('since').leader$.subscribe((info) => seen.push(info));
    await eventually(() => seen.length === 1);
    expect(Math.abs(seen[0]!.since.getTime() - term.since.getTime())).toBeLessThan(500);
    sub.unsubscribe();
    await term.resign();
    expect((await observer.inspect(`${LEADER_KEY_PREFIX}since`))?.held).toBe(false);
  });
});
