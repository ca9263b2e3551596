// The contract of engine v2's lock collection, run against MongoDB (`LineStore`) and against
// the testing kit's in-memory lines: one script of commands, the same replies and the same
// change events, less what differs by nature (clock values, tokens; fences compare by rank).
import type { MongoClient } from 'mongodb';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LockEvent } from '../../lib/interfaces/lock-state.interface';
import type { JoinRequest } from '../../lib/store/line/line-commands';
import type { LineDocument, LineKind } from '../../lib/store/line/line-document';
import type { LineChange } from '../../lib/store/line/line-events';
import { LineStore } from '../../lib/store/line/line-store';
import type { KeyLineStorage } from '../../lib/store/line/line-store';
import { InMemoryLineStore } from '../../lib/testing/in-memory-line-store';
import { InMemoryLines } from '../../lib/testing/in-memory-lines';
import { LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

const kit = LockTestKit.forSuite();
const settings = { operationTimeoutMs: 5_000, idleRetentionMs: 60_000 };

/** Opens one service's connection to the lines under test. */
type Open = () => Promise<KeyLineStorage>;

const EXCLUSIVE: LineKind = { mode: 'exclusive' };
const SHARED: LineKind = { mode: 'shared' };
const permits = (weight: number): LineKind => ({ mode: 'permits', permits: 3, weight });
/**
 * A lease the script lets run out: long enough for the commands it must outlast (the joins
 * behind it, each followed by `settled()`), which on a loaded machine take over a second.
 */
const SHORT_MS = 3_000;
/** How long before a short lease ends the joins behind it must have been answered. */
const SHORT_MARGIN_MS = 500;

/** The joins behind a short lease were not all answered while it lived. */
class SlowSetup extends Error {}

/**
 * Runs the script and returns what it saw: every reply, and what each connection's watches
 * heard, with tokens as the script's names and fences as their rank among the fences seen.
 */
async function runScript(open: Open, quietMs: number): Promise<unknown> {
  const a = await open();
  const b = await open();
  const names = new Map<string, string>();
  const tokens = new Map<string, string>();
  const token = (name: string) => {
    let value = tokens.get(name);
    if (!value) {
      value = `${name}-${Math.random().toString(36).slice(2)}`;
      tokens.set(name, value);
      names.set(value, name);
    }
    return value;
  };
  const named = (value: string | undefined) => (value ? (names.get(value) ?? value) : value);
  // Each joined entry's fence, by the script's name: what an operator was shown.
  const joinedFences = new Map<string, bigint>();
  const replies: unknown[] = [];
  const heard: Record<string, unknown[]> = { a: [], b: [], events: [] };
  // Fences compare within their key: by rank among the key's fences seen.
  const fences = new Map<string, bigint[]>();
  const fence = (key: string, value: bigint | null | undefined): unknown => {
    if (value === null || value === undefined) return value;
    fences.set(key, [...(fences.get(key) ?? []), value]);
    return { key, value };
  };
  const onChange = (who: string) => (change: LineChange) =>
    heard[who].push([
      change.key,
      change.holders.map((h) => [named(h.t), fence(change.key, h.fence)]),
      // An operator's write makes the key's waiters read their place again.
      change.lookAgain ?? false,
    ]);
  const onEvent = (event: LockEvent) =>
    heard.events.push([event.type, event.key, event.holderId, fence(event.key, event.fence)]);
  const watches = [
    a.watch('svc-a', onChange('a')),
    b.watch('svc-b', onChange('b')),
    a.watchEvents(onEvent),
  ];
  await Promise.all(watches.map((watch) => watch.opened));
  const close = async () => {
    await Promise.all(watches.map((watch) => watch.close()));
    for (const store of [a, b]) await (store as { close?: () => Promise<void> }).close?.();
  };

  // After each write, until its change events have arrived: MongoDB reads a change's document
  // when it streams it, so a later write could otherwise show in an earlier change.
  const total = () => heard.a.length + heard.b.length + heard.events.length;
  const settled = async () => {
    for (let before = -1; before !== total();) {
      before = total();
      await sleep(quietMs);
    }
  };

  const ids = new Map([
    [a, 'svc-a'],
    [b, 'svc-b'],
  ]);
  const join = async (
    store: KeyLineStorage,
    key: string,
    name: string,
    kind: LineKind = EXCLUSIVE,
    extra: Partial<JoinRequest> = {},
  ) => {
    const ttlMs = extra.ttlMs ?? 30_000;
    const result = await store.join({
      key,
      token: token(name),
      holderId: ids.get(store) as string,
      ttlMs,
      kind,
      onlyIfHolds: false,
      ...extra,
    });
    const answeredAt = performance.now();
    if (result.joined) joinedFences.set(name, result.fence);
    replies.push(
      result.joined
        ? [
            'join',
            name,
            true,
            result.holds,
            result.ahead,
            result.blockerId,
            fence(key, result.fence),
          ]
        : ['join', name, false, result.reason, result.holderId, result.inUse],
    );
    await settled();
    return answeredAt;
  };
  const leave = async (store: KeyLineStorage, key: string, name: string) => {
    const result = await store.leave(key, token(name));
    replies.push([
      'leave',
      name,
      result.left,
      result.holders.map((h) => [named(h.t), h.h, fence(key, h.fence)]),
    ]);
    await settled();
  };
  const renew = async (store: KeyLineStorage, key: string, name: string) => {
    const result = await store.renew(key, token(name), 60_000);
    // Renewed for 60 s where the join took 30 s: counted from the server's now, never past it.
    const longer = result.renewed && result.remainingMs > 59_000 && result.remainingMs <= 60_000;
    replies.push(['renew', name, result.renewed, result.renewed && result.holds, longer]);
    await settled();
  };
  // A shorter renewal: the lease it leaves, from the join's 30 s (`exactly`: `expireIn`'s).
  const renewFor = async (
    store: KeyLineStorage,
    key: string,
    name: string,
    ttlMs: number,
    exactly: boolean,
  ) => {
    const result = await store.renew(key, token(name), ttlMs, exactly);
    const left = !result.renewed
      ? 'gone'
      : result.remainingMs > 20_000
        ? 'kept'
        : result.remainingMs <= ttlMs
          ? 'cut'
          : 'between';
    replies.push(['renewFor', name, ttlMs, exactly, left]);
    await settled();
  };
  const forceRelease = async (store: KeyLineStorage, key: string) => {
    const freed = await store.forceRelease(key);
    replies.push(['forceRelease', key, freed.map((h) => [h.holderId, fence(key, h.fence)])]);
    await settled();
  };
  // A release of the entries named (their fences, as an operator was shown them).
  const forceReleaseShown = async (store: KeyLineStorage, key: string, shown: string[]) => {
    const freed = await store.forceRelease(
      key,
      shown.map((name) => joinedFences.get(name) as bigint),
    );
    replies.push(['forceRelease', key, shown, freed.map((h) => [h.holderId, fence(key, h.fence)])]);
    await settled();
  };
  const releaseScope = async (store: KeyLineStorage, scope: string) => {
    const removed = await store.releaseScope(scope);
    const holders = removed.map(({ key, holders }) => [
      key,
      holders.map((h) => [h.holderId, fence(key, h.fence)]),
    ]);
    replies.push(['releaseScope', scope, holders]);
    await settled();
  };
  const place = async (key: string, name: string) => {
    const result = await b.place(key, token(name));
    replies.push(['place', name, result && [result.holds, result.ahead, result.blockerId]]);
  };
  // `joinedSince`: the clock before the latest holder's join.
  const inspect = async (key: string, joinedSince?: number) => {
    const state = await a.inspect(key);
    replies.push([
      'inspect',
      key,
      state && [state.held, state.holderId, state.mode, state.waiting, state.permits],
      // The latest holder's join time, read from its fence: the clock at its join (this host's
      // clock, as the server's), not before `joinedSince`; the key's earlier fences are seconds
      // older.
      joinedSince !== undefined &&
        !!state?.acquiredAt &&
        state.acquiredAt.getTime() >= joinedSince - 100 &&
        state.acquiredAt.getTime() <= Date.now(),
      state?.holders.map((h) => [h.holderId, fence(key, h.fence), h.weight, h.scope]),
    ]);
  };

  // A mutex: a holder, a waiter, a retried join, refusals, a hand-off by leaving.
  await join(a, 'k', 'A1');
  await join(b, 'k', 'B1');
  await join(b, 'k', 'B1');
  await join(b, 'k', 'B2', EXCLUSIVE, { onlyIfHolds: true });
  await join(a, 'k', 'S0', SHARED, { onlyIfHolds: true });
  await join(b, 'k', 'P0', permits(1));
  await renew(a, 'k', 'A1');
  await place('k', 'B1');
  await inspect('k');
  await leave(a, 'k', 'A1');
  await leave(a, 'k', 'A1');
  await place('k', 'B1');
  // A waiter behind the holder leaves: who leads is unchanged, so nobody is told.
  await join(a, 'k', 'C1');
  await leave(a, 'k', 'C1');
  await leave(b, 'k', 'B1');
  await inspect('k');

  // A renewal never shortens a lease (one landing late must not cut a later one's); an
  // exact one (`expireIn`) does.
  await join(a, 'ext', 'L1');
  await renewFor(a, 'ext', 'L1', SHORT_MS, false);
  await renewFor(a, 'ext', 'L1', SHORT_MS, true);
  await leave(a, 'ext', 'L1');

  // Shared holders, an exclusive waiter between them and a later reader.
  await join(a, 'rw', 'S1', SHARED);
  await join(b, 'rw', 'S2', SHARED);
  await join(a, 'rw', 'X1');
  await join(b, 'rw', 'S3', SHARED);
  await inspect('rw');
  await leave(a, 'rw', 'S1');
  await leave(b, 'rw', 'S2');
  await inspect('rw');
  await leave(a, 'rw', 'X1');
  await leave(b, 'rw', 'S3');

  // A semaphore of 3 permits: a try that fits exactly, weights that do not, another form.
  await join(a, 'sem', 'P1', permits(2));
  await join(b, 'sem', 'P4', permits(1), { onlyIfHolds: true });
  await leave(b, 'sem', 'P4');
  await join(b, 'sem', 'P2', permits(2));
  await join(b, 'sem', 'P3', permits(1), { onlyIfHolds: true });
  await join(a, 'sem', 'X2', EXCLUSIVE);
  await inspect('sem');
  await leave(a, 'sem', 'P1');
  await place('sem', 'P2');
  await leave(b, 'sem', 'P2');
  // Emptied, the key may become a lock: its permits go.
  await join(a, 'sem', 'X3', EXCLUSIVE);
  await inspect('sem');
  await leave(a, 'sem', 'X3');

  // Leases that run out, all set up before one wait. E1, D1 and T1 must still be live when the
  // entries behind them join (else those join a free key): each is timed from before its join
  // (its lease starts later) to the reply of the last join behind it.
  const outlived = async (from: number, answeredAt: number, entry: string) => {
    const ms = answeredAt - from;
    if (ms <= SHORT_MS - SHORT_MARGIN_MS) return;
    await close();
    throw new SlowSetup(
      `the joins behind ${entry} (a ${SHORT_MS} ms lease) took ${Math.round(ms)} ms, over ` +
        `${SHORT_MS - SHORT_MARGIN_MS} ms`,
    );
  };
  let from = performance.now();
  await join(a, 'short', 'E1', EXCLUSIVE, { ttlMs: SHORT_MS });
  await outlived(from, await join(b, 'short', 'E2'), 'E1');
  from = performance.now();
  await join(a, 'dead', 'D1', EXCLUSIVE, { ttlMs: SHORT_MS });
  await join(b, 'dead', 'D2');
  await outlived(from, await join(a, 'dead', 'D3'), 'D1');
  from = performance.now();
  await join(a, 'stale', 'T1', EXCLUSIVE, { ttlMs: SHORT_MS });
  await outlived(from, await join(b, 'stale', 'T2'), 'T1');
  await join(a, 'gone', 'G1', EXCLUSIVE, { ttlMs: SHORT_MS });
  const lastShortAt = await join(b, 'xjob-9', 'J4', EXCLUSIVE, {
    scope: 'other',
    ttlMs: SHORT_MS,
  });
  // Every short lease has ended: the last one started before its join's reply.
  await sleep(Math.max(0, lastShortAt + SHORT_MS + 500 - performance.now()));
  // The entry behind a dead one holds with no write; a renewal drops the dead one.
  await place('short', 'E2');
  await renew(a, 'short', 'E1');
  await leave(a, 'short', 'E1');
  await inspect('short');
  await leave(b, 'short', 'E2');
  // A leave drops the dead entries ahead too: the next live one leads, and its process hears.
  await leave(b, 'dead', 'D2');
  await inspect('dead');
  await leave(a, 'dead', 'D3');
  // A join long after the key's last fence: its fence (and `acquiredAt`) is from the clock.
  const d4From = Date.now();
  await join(b, 'dead', 'D4');
  await inspect('dead', d4From);
  await leave(b, 'dead', 'D4');
  // A refused try writes nothing (the dead entry stays); leaving by the dead entry's token
  // then drops it, and the next entry's process hears it leads.
  await join(a, 'stale', 'T3', EXCLUSIVE, { onlyIfHolds: true });
  await leave(a, 'stale', 'T1');
  await leave(b, 'stale', 'T2');
  // Nothing live: nothing to free, nothing written; no live entry of the scope: none written.
  await forceRelease(a, 'gone');
  await forceRelease(a, 'nobody');
  await releaseScope(a, 'other');

  // A forced release removes every shared holder, and only them; each one wakes everyone.
  await join(a, 'readers', 'R1', SHARED);
  await join(b, 'readers', 'R2', SHARED);
  await join(b, 'readers', 'W1');
  await join(a, 'readers', 'W2');
  await forceRelease(b, 'readers');
  await inspect('readers');
  await forceRelease(a, 'readers');
  await inspect('readers');
  await leave(a, 'readers', 'W2');
  // Scopes: the live entries of the scope go, holding or waiting.
  await join(a, 'job-1', 'J1', EXCLUSIVE, { scope: 'job' });
  await join(a, 'job-2', 'J2', EXCLUSIVE);
  await join(b, 'job-2', 'J3', EXCLUSIVE, { scope: 'job' });
  await releaseScope(a, 'job');
  await inspect('job-1');
  await inspect('job-2');
  await join(a, 'forced', 'F1');
  await join(b, 'forced', 'F2');
  await forceRelease(a, 'forced');
  await place('forced', 'F2');
  await leave(b, 'forced', 'F2');
  // A release of the holders shown: one that left since, its successor now holding, frees
  // nothing and writes nothing; the one holding is freed, and its waiter holds.
  await join(a, 'fenced', 'H1');
  await join(b, 'fenced', 'H2');
  await join(a, 'fenced', 'H3');
  await leave(a, 'fenced', 'H1');
  await forceReleaseShown(b, 'fenced', ['H1']);
  await inspect('fenced');
  await forceReleaseShown(b, 'fenced', ['H1', 'H2']);
  await inspect('fenced');
  await leave(a, 'fenced', 'H3');
  // Of shared holders, only those named go; a waiter named stays (it holds nothing).
  await join(a, 'fenced-rw', 'R3', SHARED);
  await join(b, 'fenced-rw', 'R4', SHARED);
  await join(a, 'fenced-rw', 'W3');
  await forceReleaseShown(a, 'fenced-rw', ['W3']);
  await forceReleaseShown(a, 'fenced-rw', ['R4', 'W3']);
  await inspect('fenced-rw');
  await leave(a, 'fenced-rw', 'R3');
  await inspect('fenced-rw');
  await leave(a, 'fenced-rw', 'W3');
  const listed = await a.list({ prefix: 'job-', after: undefined, limit: 10 });
  replies.push(['list', listed.map((state) => [state.key, state.held, state.waiting])]);
  const page = await a.list({ prefix: '', after: 'job-2', limit: 2 });
  replies.push(['list', page.map((state) => state.key)]);

  await close();

  const rank = ({ key, value }: { key: string; value: bigint }) => {
    const seen = [...new Set(fences.get(key))].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    return `${key} fence #${seen.indexOf(value)}`;
  };
  const ranked = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(ranked)
      : value && typeof value === 'object' && 'value' in value
        ? rank(value as { key: string; value: bigint })
        : value;
  return {
    replies: ranked(replies),
    heard: Object.fromEntries(Object.entries(heard).map(([who, seen]) => [who, ranked(seen)])),
  };
}

/**
 * Runs the script again (on fresh lines) while a run's setup of the short leases outlasted
 * one: such a run tests nothing of what it means to. Up to 3 runs; then the error says why.
 */
async function runTimely(run: (attempt: number) => Promise<unknown>): Promise<unknown> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await run(attempt);
    } catch (error) {
      if (!(error instanceof SlowSetup) || attempt === 3) throw error;
    }
  }
}

describe('engine v2 lock collection contract: MongoDB and the in-memory kit', () => {
  let mongo: unknown;
  let memory: unknown;

  beforeAll(async () => {
    const client: MongoClient = await kit.client();
    mongo = await runTimely(async (attempt) => {
      // A fresh collection for each run.
      const collection = client
        .db(kit.mongo.dbName)
        .collection<LineDocument>(`${kit.collectionName}_contract_${attempt}`, {
          writeConcern: { w: 'majority' },
        });
      return runScript(async () => new LineStore(collection, settings), 150);
    });
    memory = await runTimely(async () => {
      const lines = new InMemoryLines(() => Date.now());
      return runScript(async () => new InMemoryLineStore(lines, settings, () => undefined), 1);
    });
  }, 180_000);

  it('gives the same replies', () => {
    expect((memory as { replies: unknown }).replies).toEqual(
      (mongo as { replies: unknown }).replies,
    );
  });

  it('makes the same processes hear the same changes (who holds after each leave)', () => {
    const pick = (run: unknown) => {
      const { a, b } = (run as { heard: Record<string, unknown> }).heard;
      return { a, b };
    };
    expect(pick(memory)).toEqual(pick(mongo));
  });

  it('streams the same lock events', () => {
    const events = (run: unknown) => (run as { heard: { events: unknown } }).heard.events;
    expect(events(memory)).toEqual(events(mongo));
  });

  it('never shortens a lease by a renewal; an exact one (expireIn) does', () => {
    const { replies } = mongo as { replies: unknown[][] };
    const shorter = replies.filter((reply) => reply[0] === 'renewFor');
    expect(shorter).toEqual([
      ['renewFor', 'L1', SHORT_MS, false, 'kept'],
      ['renewFor', 'L1', SHORT_MS, true, 'cut'],
    ]);
  });

  it('makes every process look when a lease is cut short (expireIn), and streams no lock event', () => {
    const { heard } = mongo as { heard: Record<string, unknown[][]> };
    // L1 holds `ext` alone; only the exact renewal tells the key's waiters to look.
    for (const who of ['a', 'b']) {
      const looks = heard[who].filter(([key, , look]) => key === 'ext' && look === true);
      expect(looks).toEqual([['ext', [['L1', expect.anything()]], true]]);
    }
    const onExt = heard.events.filter(([, key]) => key === 'ext').map(([type]) => type);
    expect(onExt).toEqual(['acquired', 'released']);
  });

  it('frees only the holders named by their fences; none holding: nothing freed or written', () => {
    const { replies } = mongo as { replies: unknown[][] };
    const onFenced = replies.filter(
      (reply) =>
        ['forceRelease', 'inspect'].includes(reply[0] as string) &&
        String(reply[1]).startsWith('fenced'),
    );
    expect(onFenced).toEqual([
      ['forceRelease', 'fenced', ['H1'], []],
      [
        'inspect',
        'fenced',
        [true, 'svc-b', 'exclusive', 1, undefined],
        false,
        [['svc-b', 'fenced fence #1', 1, undefined]],
      ],
      ['forceRelease', 'fenced', ['H1', 'H2'], [['svc-b', 'fenced fence #1']]],
      [
        'inspect',
        'fenced',
        [true, 'svc-a', 'exclusive', 0, undefined],
        false,
        [['svc-a', 'fenced fence #2', 1, undefined]],
      ],
      ['forceRelease', 'fenced-rw', ['W3'], []],
      ['forceRelease', 'fenced-rw', ['R4', 'W3'], [['svc-b', 'fenced-rw fence #1']]],
      [
        'inspect',
        'fenced-rw',
        [true, 'svc-a', 'shared', 1, undefined],
        false,
        [['svc-a', 'fenced-rw fence #0', 1, undefined]],
      ],
      [
        'inspect',
        'fenced-rw',
        [true, 'svc-a', 'exclusive', 0, undefined],
        false,
        [['svc-a', 'fenced-rw fence #2', 1, undefined]],
      ],
    ]);
    // A release that freed nothing wrote nothing: no event, and no process told to look again
    // (an operator's write makes every process's waiters look).
    const { heard } = mongo as { heard: Record<string, unknown[][]> };
    const onKey = (seen: unknown[][]) => seen.filter(([key]) => key === 'fenced');
    expect(heard.events.filter(([, key]) => key === 'fenced').map(([type]) => type)).toEqual([
      ...['acquired', 'released'], // H1, until its leave
      ...['acquired', 'released'], // H2, until the release of the holders shown
      ...['acquired', 'released'], // H3
    ]);
    expect(onKey(heard.b)).toEqual([
      ['fenced', [['H2', 'fenced fence #1']], false],
      ['fenced', [['H3', 'fenced fence #2']], true],
    ]);
  });

  it('is not vacuous: the script saw holds, waits, refusals and hand-offs', () => {
    const { replies, heard } = mongo as { replies: unknown[][]; heard: Record<string, unknown[]> };
    const joins = replies.filter((reply) => reply[0] === 'join');
    expect(joins.filter((reply) => reply[2] === true && reply[3] === true).length).toBeGreaterThan(
      5,
    );
    expect(joins.filter((reply) => reply[2] === true && reply[3] === false).length).toBeGreaterThan(
      3,
    );
    expect(new Set(joins.filter((r) => r[2] === false).map((r) => r[3]))).toEqual(
      new Set(['held', 'kind']),
    );
    expect(heard.a.length + heard.b.length).toBeGreaterThan(4);
    expect(heard.events.length).toBeGreaterThan(10);
  });
});
