// Engine v2's operator commands and events (lib/store/line/line-admin.ts, line-state.ts):
// inspect, list, forceRelease, releaseScope and events$ over real lines, against a MongoDB
// over the wire. They must report what the current engine reports, never an owner token.
import { randomBytes } from 'node:crypto';
import { BSON, Long } from 'mongodb';
import type { CommandSucceededEvent, MongoClient } from 'mongodb';
import type { LockEvent, LockState } from '../../lib/interfaces/lock-state.interface';
import { listLocksQuery } from '../../lib/store/list-locks';
import {
  forceReleaseLine,
  inspectLine,
  listLines,
  releaseScopeInLines,
  watchLineEvents,
} from '../../lib/store/line/line-admin';
import type { ScopeHoldersRemoved } from '../../lib/store/line/line-admin';
import { joinLine, leaveLine, renewInLine } from '../../lib/store/line/line-commands';
import type { JoinRequest, JoinResult, LineCollection } from '../../lib/store/line/line-commands';
import { FENCES_PER_ENTRY, holdersOf, liveEntries } from '../../lib/store/line/line-document';
import type { LineDocument, LineEntry, LineKind } from '../../lib/store/line/line-document';
import { watchLines } from '../../lib/store/line/line-events';
import type { LineChange, LineWatch } from '../../lib/store/line/line-events';
import { lineEvents } from '../../lib/store/line/line-state';
import type { LineChangeEvent } from '../../lib/store/line/line-state';
import { describeWithFailPoints, faultTools } from '../lock-service/adversarial/kit';
import { LockTestKit } from '../lock-service/lock-test-kit';

const kit = LockTestKit.forSuite();
const EXCLUSIVE: LineKind = { mode: 'exclusive' };
const SHARED: LineKind = { mode: 'shared' };
const permits = (n: number, weight: number): LineKind => ({ mode: 'permits', permits: n, weight });
const RETENTION = 60_000;

let client: MongoClient;
let locks: LineCollection;
let replies: CommandSucceededEvent[];
const watches: LineWatch[] = [];

beforeEach(async () => {
  client = await kit.client({ monitorCommands: true });
  replies = [];
  client.on('commandSucceeded', (event) => replies.push(event));
  locks = client
    .db(kit.mongo.dbName)
    .collection<LineDocument>(kit.collectionName, { writeConcern: { w: 'majority' } });
});

afterEach(async () => {
  await Promise.all(watches.splice(0).map((watch) => watch.close()));
});

const token = () => randomBytes(12).toString('base64url');

/** Joins `key` as holder id `holderId`; resolves to the entry's fence. */
async function join(
  key: string,
  holderId: string,
  kind: LineKind = EXCLUSIVE,
  extra: Partial<JoinRequest> = {},
): Promise<{ token: string; fence: bigint; result: JoinResult }> {
  const tok = extra.token ?? token();
  const result = await joinLine(locks, {
    key,
    token: tok,
    holderId,
    ttlMs: 30_000,
    kind,
    onlyIfHolds: false,
    idleRetentionMs: RETENTION,
    ...extra,
  });
  if (!result.joined) throw new Error(`not joined: ${result.reason}`);
  return { token: tok, fence: result.fence, result };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, timeoutMs = 3_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!condition() && Date.now() < end) await pause(20);
}

/** JSON of anything, bigints included. */
const json = (value: unknown) =>
  JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));

/** Another process's waiters: the changes its `watchLines` stream hears. */
async function waitersOf(holderId: string): Promise<LineChange[]> {
  const heard: LineChange[] = [];
  const watch = watchLines(locks, holderId, (change) => heard.push(change));
  watches.push(watch);
  await watch.opened;
  return heard;
}

describe('inspectLine', () => {
  it('a free key: no document is null; after the last leave, free with the last fence', async () => {
    expect(await inspectLine(locks, 'free')).toBeNull();
    const a = await join('free', 'svc-a');
    await leaveLine(locks, 'free', a.token);
    expect(await inspectLine(locks, 'free')).toEqual({
      key: 'free',
      held: false,
      holderId: null,
      fence: a.fence,
      remainingMs: 0,
      acquiredAt: null,
      expiresAt: null,
      mode: null,
      holders: [],
      waiting: 0,
    });
  });

  it('an exclusive holder with a waiter: its lease, its fence, the waiter counted', async () => {
    const a = await join('x', 'svc-a');
    const b = await join('x', 'svc-b');
    const state = (await inspectLine(locks, 'x'))!;
    expect(state).toMatchObject({ key: 'x', held: true, holderId: 'svc-a', mode: 'exclusive' });
    expect(state.waiting).toBe(1);
    // The holder's, not the waiter's (the last handed out).
    expect(state.fence).toBe(a.fence);
    expect(b.fence).toBeGreaterThan(a.fence);
    expect(state.holders).toEqual([
      { holderId: 'svc-a', fence: a.fence, weight: 1, remainingMs: state.remainingMs },
    ]);
    expect(state.remainingMs).toBeGreaterThan(29_000);
    expect(state.remainingMs).toBeLessThanOrEqual(30_000);
    // The join time, from the holder's fence number (the server's clock in ms at its join; an
    // entry's first fence is its number times FENCES_PER_ENTRY).
    expect(state.acquiredAt).toEqual(new Date(Number(a.fence / FENCES_PER_ENTRY)));
    expect(Math.abs(state.acquiredAt!.getTime() - Date.now())).toBeLessThan(5_000);
    expect(state.expiresAt!.getTime() - state.acquiredAt!.getTime()).toBeGreaterThanOrEqual(29_000);
    expect(state.permits).toBeUndefined();
  });

  it('shared holders: every one in line order, the latest named, the last lease counted', async () => {
    const s1 = await join('rw', 'svc-1', SHARED, { ttlMs: 40_000 });
    const s2 = await join('rw', 'svc-2', SHARED, { ttlMs: 20_000 });
    await join('rw', 'svc-x');
    await join('rw', 'svc-3', SHARED);
    const state = (await inspectLine(locks, 'rw'))!;
    expect(state).toMatchObject({ held: true, holderId: 'svc-2', mode: 'shared', waiting: 2 });
    expect(state.holders.map((h) => [h.holderId, h.fence])).toEqual([
      ['svc-1', s1.fence],
      ['svc-2', s2.fence],
    ]);
    expect(state.acquiredAt).toEqual(new Date(Number(s2.fence / FENCES_PER_ENTRY)));
    // Until the last of the holders' leases ends: the first one's, here.
    expect(state.remainingMs).toBeGreaterThan(39_000);
    expect(state.expiresAt!.getTime()).toBeGreaterThan(Date.now() + 39_000);
    expect(state.holders[1].remainingMs).toBeLessThanOrEqual(20_000);
  });

  it('a semaphore: its permits, the holders whose weights fit, the rest waiting', async () => {
    await join('sem', 'svc-2', permits(3, 2));
    await join('sem', 'svc-1', permits(3, 1));
    await join('sem', 'svc-w', permits(3, 2));
    const state = (await inspectLine(locks, 'sem'))!;
    expect(state).toMatchObject({ mode: 'semaphore', permits: 3, holderId: 'svc-1', waiting: 1 });
    expect(state.holders.map((h) => [h.holderId, h.weight])).toEqual([
      ['svc-2', 2],
      ['svc-1', 1],
    ]);
  });

  it("shows a holder's scope, and none for a holder without one", async () => {
    await join('sc', 'svc-a', SHARED, { scope: 'session:1' });
    await join('sc', 'svc-b', SHARED);
    const { holders } = (await inspectLine(locks, 'sc'))!;
    expect(holders[0].scope).toBe('session:1');
    expect('scope' in holders[1]).toBe(false);
  });

  it('does not count entries whose lease ended, holding or waiting (no write needed)', async () => {
    await join('dead', 'svc-dead-holder', EXCLUSIVE, { ttlMs: 300 });
    const b = await join('dead', 'svc-b');
    await join('dead', 'svc-dead-waiter', EXCLUSIVE, { ttlMs: 300 });
    await join('dead', 'svc-d');
    await pause(500);
    const state = (await inspectLine(locks, 'dead'))!;
    expect(state).toMatchObject({ held: true, holderId: 'svc-b', waiting: 1 });
    expect(state.holders.map((h) => h.fence)).toEqual([b.fence]);
    // Everyone's lease ran out: free.
    await locks.updateOne({ _id: 'dead' }, { $set: { 'line.$[].e': new Date(Date.now() - 1) } });
    expect(await inspectLine(locks, 'dead')).toMatchObject({ held: false, waiting: 0 });
  });

  it('never an owner token: not in the result, not on the wire', async () => {
    const toks = [
      (await join('tok', 'svc-a', SHARED, { scope: 's' })).token,
      (await join('tok', 'svc-b', SHARED)).token,
      (await join('tok', 'svc-c')).token,
    ];
    replies = [];
    const state = await inspectLine(locks, 'tok');
    const page = await listLines(locks, listLocksQuery());
    const read = json({ state, page, wire: replies.map((r) => BSON.EJSON.stringify(r.reply)) });
    expect(read).toContain('svc-c');
    for (const tok of toks) expect(read).not.toContain(tok);
  });
});

describe('listLines', () => {
  beforeEach(async () => {
    for (const key of ['a:1', 'a:2', 'a:3', 'b:1', 'a.1', 'ab']) await join(key, `svc-${key}`);
  });
  const keys = (states: LockState[]) => states.map((state) => state.key);

  it('every key in key order, each as inspect reports it', async () => {
    const page = await listLines(locks, listLocksQuery());
    expect(keys(page)).toEqual(['a.1', 'a:1', 'a:2', 'a:3', 'ab', 'b:1']);
    // Both read at their own server time: the leases left differ by the ms between the reads.
    const timeless = ({ remainingMs, holders, ...state }: LockState) => ({
      ...state,
      holders: holders.map(({ remainingMs: _, ...holder }) => holder),
      leaseEnd: Date.now() + remainingMs,
    });
    const state = timeless((await inspectLine(locks, 'a:2'))!);
    expect(timeless(page[2])).toEqual({ ...state, leaseEnd: expect.any(Number) });
    expect(state.held).toBe(true);
    expect(page[2].remainingMs).toBeGreaterThan(29_000);
  });

  it('a prefix (its regular-expression characters taken literally), pages by after and limit', async () => {
    expect(keys(await listLines(locks, listLocksQuery({ prefix: 'a.' })))).toEqual(['a.1']);
    const first = await listLines(locks, listLocksQuery({ prefix: 'a:', limit: 2 }));
    expect(keys(first)).toEqual(['a:1', 'a:2']);
    const next = await listLines(locks, listLocksQuery({ prefix: 'a:', limit: 2, after: 'a:2' }));
    expect(keys(next)).toEqual(['a:3']);
    expect(keys(await listLines(locks, listLocksQuery({ after: 'a:3', limit: 10 })))).toEqual([
      'ab',
      'b:1',
    ]);
  });
});

describe('forceReleaseLine', () => {
  it('removes the holder; the next in line holds, and its process is woken', async () => {
    const a = await join('fr', 'svc-a', EXCLUSIVE, { scope: 'job:1' });
    const b = await join('fr', 'svc-b');
    const c = await join('fr', 'svc-c');
    const heardByB = await waitersOf('svc-b');
    const released = await forceReleaseLine(locks, 'fr', RETENTION);
    expect(released).toEqual([
      {
        holderId: 'svc-a',
        fence: a.fence,
        weight: 1,
        remainingMs: released[0].remainingMs,
        scope: 'job:1',
      },
    ]);
    expect(released[0].remainingMs).toBeGreaterThan(20_000);
    await until(() => heardByB.length > 0);
    expect(heardByB).toEqual([
      { key: 'fr', holders: [{ t: b.token, fence: b.fence }], lookAgain: true, byOperator: true },
    ]);
    expect(await renewInLine(locks, 'fr', a.token, 30_000, RETENTION)).toEqual({ renewed: false });
    expect(await renewInLine(locks, 'fr', b.token, 30_000, RETENTION)).toMatchObject({
      holds: true,
    });
    expect(await renewInLine(locks, 'fr', c.token, 30_000, RETENTION)).toMatchObject({
      holds: false,
      ahead: 1,
    });
  });

  it('never resets the fence: the next join gets a larger one, even when fences ran ahead', async () => {
    await join('fence', 'svc-a');
    const ahead = Date.now() + 600_000;
    await locks.updateOne({ _id: 'fence' }, { $set: { f: Long.fromNumber(ahead) } });
    await forceReleaseLine(locks, 'fence', RETENTION);
    const next = await join('fence', 'svc-b');
    expect(next.fence).toBeGreaterThan(BigInt(ahead));
    expect(next.result).toMatchObject({ holds: true });
  });

  it('shared holders all go; the exclusive entry behind them holds', async () => {
    const s1 = await join('rw', 'svc-1', SHARED);
    const s2 = await join('rw', 'svc-2', SHARED);
    const x = await join('rw', 'svc-x');
    const released = await forceReleaseLine(locks, 'rw', RETENTION);
    expect(released.map((h) => h.fence)).toEqual([s1.fence, s2.fence]);
    expect((await inspectLine(locks, 'rw'))?.holders.map((h) => h.fence)).toEqual([x.fence]);
  });

  it('a semaphore: the holders whose weights fit go; the waiters behind them hold', async () => {
    const w2 = await join('sem', 'svc-a', permits(3, 2));
    const w1 = await join('sem', 'svc-b', permits(3, 1));
    const next2 = await join('sem', 'svc-c', permits(3, 2));
    const next1 = await join('sem', 'svc-d', permits(3, 1));
    const released = await forceReleaseLine(locks, 'sem', RETENTION);
    expect(released.map((h) => [h.fence, h.weight])).toEqual([
      [w2.fence, 2],
      [w1.fence, 1],
    ]);
    const state = (await inspectLine(locks, 'sem'))!;
    expect(state.holders.map((h) => h.fence)).toEqual([next2.fence, next1.fence]);
    expect(state.waiting).toBe(0);
  });

  it('drops dead entries; an emptied line is kept for the idle retention, as a leave does', async () => {
    await join('gc', 'svc-dead', EXCLUSIVE, { ttlMs: 200 });
    const b = await join('gc', 'svc-b');
    await pause(400);
    const released = await forceReleaseLine(locks, 'gc', RETENTION);
    expect(released.map((h) => h.fence)).toEqual([b.fence]);
    const doc = (await locks.findOne({ _id: 'gc' }))!;
    expect(doc.line).toEqual([]);
    expect(doc.gcAt!.getTime()).toBeGreaterThan(Date.now() + RETENTION - 5_000);
    expect(doc.gcAt!.getTime()).toBeLessThanOrEqual(Date.now() + RETENTION + 1_000);
  });

  it('a key with nothing live is not written; no key, nothing released', async () => {
    const a = await join('idle', 'svc-a', EXCLUSIVE, { ttlMs: 200 });
    await pause(400);
    const before = await locks.findOne({ _id: 'idle' });
    expect(await forceReleaseLine(locks, 'idle', RETENTION)).toEqual([]);
    expect(await locks.findOne({ _id: 'idle' })).toEqual(before);
    expect(before?.line?.[0].t).toBe(a.token);
    expect(await forceReleaseLine(locks, 'none', RETENTION)).toEqual([]);
  });

  it("the server's holding prefix is holdersOf's, on random lines of every kind", async () => {
    // A fixed pseudo-random sequence: lines of exclusive and shared entries, and semaphores,
    // with dead entries anywhere.
    let seed = 42;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const now = Date.now();
    const docs: LineDocument[] = [];
    for (let i = 0; i < 60; i++) {
      const semaphore = i % 3 === 2;
      const n = 1 + Math.floor(random() * 4);
      const line: LineEntry[] = Array.from({ length: Math.floor(random() * 7) }, (_, j) => ({
        t: token(),
        f: Long.fromNumber(now + j),
        e: new Date(now + (random() < 0.2 ? -3_600_000 : 3_600_000)),
        h: `svc-${j}`,
        ...(!semaphore && random() < 0.6 ? { m: 's' as const } : {}),
        ...(semaphore ? { w: 1 + Math.floor(random() * n) } : {}),
      }));
      docs.push({
        _id: `r${i}`,
        line,
        f: Long.fromNumber(now + 10),
        ...(semaphore ? { permits: n } : {}),
      });
    }
    await locks.insertMany(docs);
    for (const doc of docs) {
      const expected = holdersOf(doc, new Date());
      const released = await forceReleaseLine(locks, doc._id, RETENTION);
      expect([doc._id, released.map((h) => h.holderId)]).toEqual([
        doc._id,
        expected.map((entry) => entry.h),
      ]);
      const after = await locks.findOne({ _id: doc._id });
      const kept = liveEntries(doc.line, new Date()).filter((entry) => !expected.includes(entry));
      expect([doc._id, (after?.line ?? []).map((entry) => entry.t)]).toEqual([
        doc._id,
        expected.length === 0 ? doc.line!.map((entry) => entry.t) : kept.map((entry) => entry.t),
      ]);
    }
  });
});

describe('releaseScopeInLines', () => {
  const holdersBy = (removed: ScopeHoldersRemoved[]) =>
    removed
      .map(({ key, holders }) => [key, holders.map((holder) => holder.holderId)])
      .sort(([a], [b]) => String(a).localeCompare(String(b)));

  it("removes that scope's entries only, counts its live holders, wakes the waiters behind", async () => {
    const S = 'session:42';
    await join('k1', 'svc-a', EXCLUSIVE, { scope: S });
    const b = await join('k1', 'svc-b');
    const c = await join('k2', 'svc-c');
    await join('k2', 'svc-d', EXCLUSIVE, { scope: S });
    await join('k2', 'svc-z', EXCLUSIVE, { ttlMs: 200 });
    await join('k3', 'svc-e', SHARED, { scope: S });
    const f = await join('k3', 'svc-f', SHARED, { scope: 'session:other' });
    await join('k4', 'svc-g', EXCLUSIVE, { scope: S, ttlMs: 200 });
    await pause(400);
    const k4 = await locks.findOne({ _id: 'k4' });
    const heardByB = await waitersOf('svc-b');

    // k1's holder and k3's first shared holder; k2's entry of the scope only waited, and
    // k4's lease had ended. Dead entries go with them (k2's last).
    expect(holdersBy(await releaseScopeInLines(locks, S, RETENTION))).toEqual([
      ['k1', ['svc-a']],
      ['k3', ['svc-e']],
    ]);

    const lineOf = async (key: string) =>
      ((await locks.findOne({ _id: key }))?.line ?? []).map((entry) => entry.t);
    expect(await lineOf('k1')).toEqual([b.token]);
    expect(await lineOf('k2')).toEqual([c.token]);
    expect(await lineOf('k3')).toEqual([f.token]);
    expect(await locks.findOne({ _id: 'k4' })).toEqual(k4);
    // Every process hears each write (k2's and k3's too): their waiters look.
    await until(() => heardByB.some((change) => change.key === 'k1'));
    expect(heardByB.filter((change) => change.key === 'k1')).toEqual([
      { key: 'k1', holders: [{ t: b.token, fence: b.fence }], lookAgain: true, byOperator: true },
    ]);
    expect(await renewInLine(locks, 'k1', b.token, 30_000, RETENTION)).toMatchObject({
      holds: true,
    });
    expect(await releaseScopeInLines(locks, S, RETENTION)).toEqual([]);
  });

  it('takes a scope name as it is (no expression), and empties a line as a leave does', async () => {
    const scope = '$$NOW';
    await join('lit', 'svc-a', EXCLUSIVE, { scope });
    await join('lit', 'svc-b', EXCLUSIVE, { scope: '$other' });
    expect(holdersBy(await releaseScopeInLines(locks, scope, RETENTION))).toEqual([
      ['lit', ['svc-a']],
    ]);
    expect((await inspectLine(locks, 'lit'))?.holders[0]).toMatchObject({
      holderId: 'svc-b',
      scope: '$other',
    });
    expect(holdersBy(await releaseScopeInLines(locks, '$other', RETENTION))).toEqual([
      ['lit', ['svc-b']],
    ]);
    const doc = (await locks.findOne({ _id: 'lit' }))!;
    expect(doc.line).toEqual([]);
    expect(doc.gcAt!.getTime()).toBeGreaterThan(Date.now() + RETENTION - 5_000);
  });
});

describe('line events', () => {
  const events: LockEvent[] = [];
  const plain = (list: LockEvent[]) =>
    list.map(({ type, key, holderId, fence }) => ({ type, key, holderId, fence }));

  beforeEach(async () => {
    events.length = 0;
    const watch = watchLineEvents(locks, (event) => events.push(event));
    watches.push(watch);
    await watch.opened;
  });

  /** The events since the last call, once `count` have come and nothing more for a while. */
  let seen = 0;
  beforeEach(() => (seen = 0));
  async function next(count: number) {
    await until(() => events.length >= seen + count);
    await pause(250);
    const got = events.slice(seen);
    seen = events.length;
    return plain(got);
  }

  it('a join that holds is acquired; a waiter joining and a renewal are nothing', async () => {
    const startedAt = Date.now();
    const a = await join('ev', 'svc-a');
    expect(await next(1)).toEqual([
      { type: 'acquired', key: 'ev', holderId: 'svc-a', fence: a.fence },
    ]);
    expect(Math.abs(events[0].at.getTime() - startedAt)).toBeLessThan(5_000);
    const b = await join('ev', 'svc-b');
    await renewInLine(locks, 'ev', a.token, 30_000, RETENTION);
    await renewInLine(locks, 'ev', b.token, 30_000, RETENTION);
    expect(await next(0)).toEqual([]);

    // A leave: released, then the next in line acquired.
    await leaveLine(locks, 'ev', a.token);
    expect(await next(2)).toEqual([
      { type: 'released', key: 'ev', holderId: null, fence: null },
      { type: 'acquired', key: 'ev', holderId: 'svc-b', fence: b.fence },
    ]);
    // The last leave: released, nobody acquires.
    await leaveLine(locks, 'ev', b.token);
    expect(await next(1)).toEqual([{ type: 'released', key: 'ev', holderId: null, fence: null }]);

    // A join on the idle document (an update, not an insert).
    const c = await join('ev', 'svc-c');
    expect(await next(1)).toEqual([
      { type: 'acquired', key: 'ev', holderId: 'svc-c', fence: c.fence },
    ]);
    await leaveLine(locks, 'ev', c.token);
    expect(await next(1)).toEqual([{ type: 'released', key: 'ev', holderId: null, fence: null }]);
    await locks.deleteOne({ _id: 'ev' });
    expect(await next(1)).toEqual([{ type: 'deleted', key: 'ev', holderId: null, fence: null }]);
  });

  it('shared joins that hold are acquired; one behind an exclusive entry is not', async () => {
    const s1 = await join('rw', 'svc-1', SHARED);
    const s2 = await join('rw', 'svc-2', SHARED);
    await join('rw', 'svc-x');
    await join('rw', 'svc-3', SHARED);
    expect(await next(2)).toEqual([
      { type: 'acquired', key: 'rw', holderId: 'svc-1', fence: s1.fence },
      { type: 'acquired', key: 'rw', holderId: 'svc-2', fence: s2.fence },
    ]);
  });

  it('a forced release and a scope release: released, then whoever holds now', async () => {
    await join('op', 'svc-a', EXCLUSIVE, { scope: 'job' });
    const b = await join('op', 'svc-b', EXCLUSIVE, { scope: 'job' });
    const c = await join('op', 'svc-c');
    await next(1);
    await forceReleaseLine(locks, 'op', RETENTION);
    expect(await next(2)).toEqual([
      { type: 'released', key: 'op', holderId: null, fence: null },
      { type: 'acquired', key: 'op', holderId: 'svc-b', fence: b.fence },
    ]);
    await releaseScopeInLines(locks, 'job', RETENTION);
    expect(await next(2)).toEqual([
      { type: 'released', key: 'op', holderId: null, fence: null },
      { type: 'acquired', key: 'op', holderId: 'svc-c', fence: c.fence },
    ]);
  });

  it('a write MongoDB logged whole (a replace event): the waiter named hears it, and events$ reports the holders', async () => {
    const a = await join('whole', 'svc-a');
    const b = await join('whole', 'svc-b');
    await next(1);
    const heardByB = await waitersOf('svc-b');
    // A leave as MongoDB streams it when its delta is not smaller than the document: the document
    // as written (a key of a few bytes).
    const doc = (await locks.findOne({ _id: 'whole' }))!;
    const rest = (doc.line ?? []).slice(1);
    await locks.replaceOne({ _id: 'whole' }, { ...doc, line: rest, lead: `svc-b ${b.token}` });
    await until(() => heardByB.length > 0);
    expect(heardByB).toEqual([
      { key: 'whole', holders: [{ t: b.token, fence: b.fence }], lookAgain: true },
    ]);
    expect(await next(2)).toEqual([
      { type: 'released', key: 'whole', holderId: null, fence: null },
      { type: 'acquired', key: 'whole', holderId: 'svc-b', fence: b.fence },
    ]);
    // The last leave leaves `lead` null.
    await locks.replaceOne({ _id: 'whole' }, { ...doc, line: [], lead: null });
    expect(await next(1)).toEqual([
      { type: 'released', key: 'whole', holderId: null, fence: null },
    ]);
    // A join on the emptied line: entries under a null `lead` (no leave since) are joins.
    const [first] = doc.line ?? [];
    await locks.replaceOne({ _id: 'whole' }, { ...doc, f: first.f, line: [first], lead: null });
    expect(await next(1)).toEqual([
      { type: 'acquired', key: 'whole', holderId: 'svc-a', fence: a.fence },
    ]);
  });

  it("a semaphore's last leave names nobody: neither it nor a later join streamed whole wakes a process", async () => {
    const p1 = await join('sem-idle', 'svc-a', permits(3, 1));
    const heardByB = await waitersOf('svc-b');
    await leaveLine(locks, 'sem-idle', p1.token);
    await join('sem-idle', 'svc-c', permits(3, 1));
    // The join as MongoDB streams it when it logs it whole: the document as written.
    const doc = (await locks.findOne({ _id: 'sem-idle' }))!;
    expect(doc.lead ?? null).toBeNull();
    await locks.replaceOne({ _id: 'sem-idle' }, doc);
    await pause(300);
    expect(heardByB).toEqual([]);
  });

  it('a join whose entry left before the lookup is reported from the delta when it was first', () => {
    const entry = { t: 'tok', f: Long.fromNumber(1_000), e: new Date(), h: 'svc-gone' };
    const change = {
      _id: { _data: '00' },
      operationType: 'update',
      ns: { db: 'd', coll: 'c' },
      documentKey: { _id: 'k' },
      clusterTime: { t: 1_700_000_000, i: 1 },
      updateDescription: { updatedFields: { f: entry.f, 'line.0': entry, gcAt: new Date() } },
      fullDocument: { _id: 'k', line: [], f: entry.f },
    } as unknown as LineChangeEvent;
    expect(lineEvents(change)).toEqual([
      {
        type: 'acquired',
        key: 'k',
        holderId: 'svc-gone',
        // The entry's first fence: its number times FENCES_PER_ENTRY.
        fence: 16_000n,
        at: new Date(1_700_000_000_000),
      },
    ]);
    // The same join second in line, exclusive: a waiter, whatever the document says later.
    const waiter = {
      ...change,
      updateDescription: { updatedFields: { f: entry.f, 'line.1': entry } },
      fullDocument: { _id: 'k', line: [entry], f: entry.f },
    } as unknown as LineChangeEvent;
    expect(lineEvents(waiter)).toEqual([]);
  });
});

describeWithFailPoints('the events stream of a client that has seen the cluster', () => {
  const { failPoint, appClient } = faultTools(kit);

  it('reports a change made after it was opened, before its first command ran', async () => {
    const watcher = await appClient('events-late-start');
    const watched = watcher.db(kit.mongo.dbName).collection<LineDocument>(kit.collectionName);
    await watched.findOne({});
    // Its first aggregate runs 500 ms late (as when the driver cannot select the server yet).
    await failPoint(
      { times: 1 },
      {
        failCommands: ['aggregate'],
        appName: 'events-late-start',
        blockConnection: true,
        blockTimeMS: 500,
      },
    );
    const events: LockEvent[] = [];
    const watch = watchLineEvents(watched, (event) => events.push(event));
    watches.push(watch);
    await pause(100);
    const a = await join('late-start', 'svc-a');
    await watch.opened;
    await until(() => events.length > 0);
    expect(events.map(({ type, key, fence }) => ({ type, key, fence }))).toEqual([
      { type: 'acquired', key: 'late-start', fence: a.fence },
    ]);
  });

  /** A stream on a client of its own that has seen the cluster, and what it reports. */
  async function watchedBy(appName: string) {
    const watcher = await appClient(appName);
    const watched = watcher.db(kit.mongo.dbName).collection<LineDocument>(kit.collectionName);
    await watched.findOne({});
    const events: LockEvent[] = [];
    let failures = 0;
    let opens = 0;
    const watch = watchLineEvents(
      watched,
      (event) => events.push(event),
      () => (failures += 1),
      () => (opens += 1),
    );
    watches.push(watch);
    await watch.opened;
    return { events, failures: () => failures, opens: () => opens };
  }
  const keysOf = (events: LockEvent[]) => events.map(({ type, key }) => `${type} ${key}`);

  it('starts just after the cluster time its client had seen: not at its own last write', async () => {
    const watcher = await appClient('events-own-write');
    const watched = watcher.db(kit.mongo.dbName).collection<LineDocument>(kit.collectionName);
    // The client's newest cluster time is that of its own write.
    await joinLine(watched, {
      key: 'own-before',
      token: token(),
      holderId: 'svc-a',
      ttlMs: 30_000,
      kind: EXCLUSIVE,
      onlyIfHolds: false,
      idleRetentionMs: RETENTION,
    });
    const events: LockEvent[] = [];
    const watch = watchLineEvents(watched, (event) => events.push(event));
    watches.push(watch);
    await watch.opened;
    await join('own-after', 'svc-a');
    await until(() => events.length > 0);
    await pause(300);
    expect(keysOf(events)).toEqual(['acquired own-after']);
  });

  it('reopened after a failed read, resumes after its last change: none missed, none twice', async () => {
    const watched = await watchedBy('events-reopen');
    await join('reopen-a', 'svc-a');
    await until(() => watched.events.length > 0);
    // Its next read fails for good (not resumable): it is reopened after a pause, resuming
    // after the change it reported (never also from its first start point, which MongoDB
    // refuses, nor from that point alone, which would report that change again).
    await failPoint(
      { times: 1 },
      { failCommands: ['getMore'], appName: 'events-reopen', errorCode: 2, errorLabels: [] },
    );
    await until(() => watched.failures() > 0);
    await join('reopen-b', 'svc-a');
    await until(() => watched.events.length > 1);
    await pause(300);
    expect(watched.failures()).toBe(1);
    expect(keysOf(watched.events)).toEqual(['acquired reopen-a', 'acquired reopen-b']);
  });

  it('whose resume point is lost, starts afresh: not at its first start point again', async () => {
    const watched = await watchedBy('events-lost');
    await join('lost-a', 'svc-a');
    await until(() => watched.events.length > 0);
    // ChangeStreamHistoryLost: neither its last change nor its first start point can be
    // resumed from any more, so it starts where its new command runs.
    await failPoint(
      { times: 1 },
      { failCommands: ['getMore'], appName: 'events-lost', errorCode: 286, errorLabels: [] },
    );
    await until(() => watched.opens() > 1);
    await join('lost-b', 'svc-a');
    await until(() => watched.events.length > 1);
    await pause(300);
    expect(watched.failures()).toBe(1);
    expect(keysOf(watched.events)).toEqual(['acquired lost-a', 'acquired lost-b']);
  });
});
