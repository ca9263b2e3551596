// Engine v2's acquisition (lib/line-acquirer.ts) over the line store: waiting by position,
// woken by change events across services and by the release's reply within one.
import { MongoNetworkError } from 'mongodb';
import type { MongoClient } from 'mongodb';
import { LockNotAcquiredError } from '../../lib/errors/lock-not-acquired.error';
import { LockStoreUnavailableError } from '../../lib/errors/lock-store-unavailable.error';
import { LineAcquirer } from '../../lib/line-acquirer';
import { LineHandover } from '../../lib/line-handover';
import type { LineAcquireRequest } from '../../lib/line-attempt';
import type { LineHold } from '../../lib/line-handover';
import type { LineCollection } from '../../lib/store/line/line-commands';
import { joinLine } from '../../lib/store/line/line-commands';
import { forceReleaseLine } from '../../lib/store/line/line-admin';
import type { LineDocument } from '../../lib/store/line/line-document';
import { holdingEntry } from '../../lib/store/line/line-document';
import { watchLines } from '../../lib/store/line/line-events';
import { LEAVE_PIPELINE, RENEW_PIPELINE } from '../../lib/store/line/line-pipelines';
import type { LineWatch } from '../../lib/store/line/line-events';
import { LineStore } from '../../lib/store/line/line-store';
import { LineWaiters } from '../../lib/waiting/line-waiters';
import { LockTestKit, eventually, sleep } from '../lock-service/lock-test-kit';
import { commandOf, interceptedCollection } from '../support/intercepted-collection';
import { LOAD_SLACK_MS } from '../support/load-slack';

// Jest's 5 s default is a few steps of a loaded machine; each test bounds its own waits.
jest.setTimeout(30_000);

const kit = LockTestKit.forSuite();
const settings = { operationTimeoutMs: 5_000, idleRetentionMs: 60_000 };
const streams: LineWatch[] = [];

afterEach(async () => {
  await Promise.all(streams.splice(0).map((stream) => stream.close()));
});

/** One service's engine: its own client, waiters and (unless `watch` is false) change stream. */
async function service(name: string, watch = true) {
  const client: MongoClient = await kit.client();
  const collection: LineCollection = client
    .db(kit.mongo.dbName)
    .collection<LineDocument>(kit.collectionName, { writeConcern: { w: 'majority' } });
  const waiters = new LineWaiters();
  if (watch) {
    const stream = watchLines(collection, name, (change) =>
      waiters.heard(change.key, change.holders),
    );
    streams.push(stream);
    await stream.opened;
  }
  const acquirer = new LineAcquirer({
    store: new LineStore(collection, settings),
    waiters,
    handover: new LineHandover(false),
    holderId: name,
  });
  return { acquirer, collection, waiters };
}

/** A `$map` step giving `token`'s entry 30 s more from now, dead or not. */
const revivedIf = (token: string | undefined) => ({
  $cond: [
    { $eq: ['$$this.t', token] },
    { $mergeObjects: ['$$this', { e: { $add: ['$$NOW', 30_000] } }] },
    '$$this',
  ],
});

/** Service `b`'s acquirer over `collection` (no hand-over within the process). */
function acquirerOver(
  collection: LineCollection,
  waiters: LineWaiters,
  extra: Partial<typeof settings> = {},
): LineAcquirer {
  return new LineAcquirer({
    store: new LineStore(collection, { ...settings, ...extra }),
    waiters,
    handover: new LineHandover(false),
    holderId: 'b',
  });
}

const request = (key: string, extra: Partial<LineAcquireRequest> = {}): LineAcquireRequest => ({
  key,
  kind: { mode: 'exclusive' },
  ttlMs: 30_000,
  timeoutMs: 10_000,
  ...extra,
});

/** The line once the background leave of a waiter that gave up has landed (within 1 s). */
async function lineSettled(collection: LineCollection, key: string): Promise<string[]> {
  for (let i = 0; i < 20 && (await lineOf(collection, key)).length > 1; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return lineOf(collection, key);
}

async function lineOf(collection: LineCollection, key: string): Promise<string[]> {
  return ((await collection.findOne({ _id: key }))?.line ?? []).map((entry) => entry.h);
}

it('a waiter in another service holds once the holder releases (its change event)', async () => {
  const a = await service('a');
  const b = await service('b');
  const held = await a.acquirer.acquire(request('k'));
  let bHeld: LineHold | undefined;
  const waiting = b.acquirer.acquire(request('k')).then((hold) => (bHeld = hold));
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(bHeld).toBeUndefined();
  await a.acquirer.release(held);
  const next = await waiting;
  expect(next.fence).toBeGreaterThan(held.fence);
});

it('a waiter in the same service is woken by the release reply, with no stream', async () => {
  const a = await service('a', false);
  const held = await a.acquirer.acquire(request('local'));
  const waiting = a.acquirer.acquire(request('local', { timeoutMs: 5_000 }));
  // Its join landed: it waits in line (it does not hold by its join's reply).
  await eventually(async () => (await lineOf(a.collection, 'local')).length === 2);
  await a.acquirer.release(held);
  const startedAt = performance.now();
  await waiting;
  // By the reply; not by its renewal timer (10 s at this lease) nor its deadline (5 s, where it
  // would fail).
  expect(performance.now() - startedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
});

it('a lease ahead that runs out is confirmed by renewing our own entry', async () => {
  const a = await service('a', false);
  const b = await service('b', false);
  await a.acquirer.acquire(request('dead', { ttlMs: 300 }));
  const next = await b.acquirer.acquire(request('dead', { timeoutMs: 5_000 }));
  expect(next.leaseEnd).toBeGreaterThan(performance.now());
  expect(await lineOf(b.collection, 'dead')).toEqual(['b']);
});

it('a waiter that times out rejects and leaves the line', async () => {
  const a = await service('a');
  const b = await service('b');
  await a.acquirer.acquire(request('t'));
  // A read connects the pool (b's stream holds a connection) before the wait: its join's reply,
  // late, would fail it as MongoDB's silence (LockStoreUnavailableError), not by its place.
  expect(await lineOf(b.collection, 't')).toEqual(['a']);
  await expect(b.acquirer.acquire(request('t', { timeoutMs: 1_500 }))).rejects.toBeInstanceOf(
    LockNotAcquiredError,
  );
  expect(await lineSettled(a.collection, 't')).toEqual(['a']);
});

it('an aborted waiter rejects with its reason and leaves the line', async () => {
  const a = await service('a');
  const b = await service('b');
  await a.acquirer.acquire(request('ab'));
  const controller = new AbortController();
  const waiting = b.acquirer.acquire(request('ab', { signal: controller.signal }));
  await new Promise((resolve) => setTimeout(resolve, 100));
  controller.abort(new Error('caller left'));
  await expect(waiting).rejects.toThrow('caller left');
  expect(await lineSettled(a.collection, 'ab')).toEqual(['a']);
});

it('tryAcquire (timeout 0) on a held key says who holds, and joins nothing', async () => {
  const a = await service('a');
  const b = await service('b');
  await a.acquirer.acquire(request('try'));
  await expect(b.acquirer.acquire(request('try', { timeoutMs: 0 }))).rejects.toMatchObject({
    holderId: 'a',
  });
  expect(await lineOf(a.collection, 'try')).toEqual(['a']);
});

it('callers of two services take turns without overlap, in fence order', async () => {
  const services = [await service('a'), await service('b')];
  const sections: { fence: bigint; start: number; end: number }[] = [];
  await Promise.all(
    services.flatMap(({ acquirer }) =>
      [0, 1, 2].map(async () => {
        for (let i = 0; i < 8; i++) {
          const hold = await acquirer.acquire(request('busy'));
          const start = performance.now();
          await new Promise((resolve) => setTimeout(resolve, 2));
          sections.push({ fence: hold.fence, start, end: performance.now() });
          await acquirer.release(hold);
        }
      }),
    ),
  );
  expect(sections).toHaveLength(48);
  const byStart = [...sections].sort((x, y) => x.start - y.start);
  for (let i = 1; i < byStart.length; i++) {
    expect(byStart[i].start).toBeGreaterThanOrEqual(byStart[i - 1].end);
    expect(byStart[i].fence).toBeGreaterThan(byStart[i - 1].fence);
  }
});

it("routes a release's event to the process its entry leads to (everyone for shared)", async () => {
  const a = await service('a');
  const b = await service('b');
  const heard: Record<string, string[][]> = { b: [], c: [] };
  const watches = await Promise.all(
    (['b', 'c'] as const).map(async (name) => {
      const watch = watchLines(b.collection, name, (change) =>
        heard[name].push(change.holders.map((entry) => entry.t)),
      );
      await watch.opened;
      return watch;
    }),
  );
  streams.push(...watches);
  const first = await a.acquirer.acquire(request('route'));
  const next = b.acquirer.acquire(request('route'));
  // b waits in line: a's release makes it holder.
  await eventually(async () => (await lineOf(a.collection, 'route')).length === 2);
  await a.acquirer.release(first);
  const held = await next;
  await eventually(() => heard.b.length > 0);
  // Time for a wrong event to c (and the shared half's below comes after it, on c's stream).
  await sleep(100);
  expect(heard.b).toEqual([[held.token]]);
  expect(heard.c).toEqual([]);

  // A shared entry at the front: every process looks.
  const shared = { mode: 'shared' } as const;
  const x = await b.acquirer.acquire(request('route-s'));
  const s1 = a.acquirer.acquire(request('route-s', { kind: shared }));
  await eventually(async () => (await lineOf(a.collection, 'route-s')).length === 2);
  await b.acquirer.release(x);
  const sharedHeld = await s1;
  await eventually(() => heard.c.length > 0);
  await sleep(100);
  // Only the shared front's event: none of the release routed to b came before it.
  expect(heard.c).toEqual([[sharedHeld.token]]);
});

describe('what the second review found', () => {
  it('a semaphore released out of order wakes the waiter its release lets in', async () => {
    const [a, b, c] = [await service('a'), await service('b'), await service('c')];
    const kind = { mode: 'permits', permits: 2, weight: 1 } as const;
    const a0 = await a.acquirer.acquire(request('sem', { kind }));
    const a1 = await a.acquirer.acquire(request('sem', { kind }));
    const b2 = b.acquirer.acquire(request('sem', { kind }));
    await sleep(100);
    await a.acquirer.release(a0);
    const heldByB = await b2;
    const waiting = c.acquirer.acquire(request('sem', { kind, timeoutMs: 3_000 }));
    await sleep(100);
    // Out of order: b's permit goes first, a1 still holds; c is let in by b's release.
    await b.acquirer.release(heldByB);
    await expect(waiting).resolves.toMatchObject({ key: 'sem' });
    await a.acquirer.release(a1);
  });

  it('a shared waiter behind a writer that gives up is woken', async () => {
    const [a, b, c] = [await service('a'), await service('b'), await service('c')];
    const shared = { mode: 'shared' } as const;
    const s0 = await a.acquirer.acquire(request('rw', { kind: shared }));
    await a.acquirer.acquire(request('rw', { kind: shared }));
    const writer = c.acquirer.acquire(request('rw', { timeoutMs: 600 }));
    await sleep(100);
    const reader = b.acquirer.acquire(request('rw', { kind: shared, timeoutMs: 3_000 }));
    await sleep(100);
    await a.acquirer.release(s0);
    await expect(writer).rejects.toBeInstanceOf(LockNotAcquiredError);
    await expect(reader).resolves.toMatchObject({ key: 'rw' });
  });

  it('news of an entry that ended does not reach the entry that replaced it', async () => {
    const [a, b] = [await service('a', false), await service('b', false)];
    const held = await a.acquirer.acquire(request('stale', { ttlMs: 30_000 }));
    let got: LineHold | undefined;
    const waiting = b.acquirer.acquire(request('stale', { ttlMs: 600 })).then((h) => (got = h));
    await eventually(async () => (await lineOf(b.collection, 'stale')).length === 2);
    const ended = (await b.collection.findOne({ _id: 'stale' }))!.line![1];
    // The waiter's entry ends (as in a long stall); its renewal finds it gone and joins again.
    await b.collection.updateOne({ _id: 'stale' }, { $set: { 'line.1.e': new Date(0) } });
    // Joined again: another entry (another fence) in its place, which news of the ended one
    // below must not wake.
    await eventually(async () => {
      const entry = (await b.collection.findOne({ _id: 'stale' }))?.line?.[1];
      return entry !== undefined && String(entry.f) !== String(ended.f);
    });
    b.waiters.heard('stale', [holdingEntry(ended)]);
    await sleep(100);
    expect(got).toBeUndefined();
    await a.acquirer.release(held);
    await waiting;
    expect(got!.token).not.toBe(ended.t);
  });

  // L16 (test/faults/FINDINGS.md): under network faults, a join retried by its token after
  // its first landed and ran out joined again at the back, and the news that the first had
  // led made the second hold at once, beside the holder ahead of it.
  it('a join retried by its token takes no news of its first entry, which ran out', async () => {
    const [a, b] = [await service('a'), await service('b')];
    let loseReply!: () => void;
    const replyLost = new Promise<void>((resolve) => (loseReply = resolve));
    let joins = 0;
    // b's first join lands, and its reply is lost once the test says so.
    const lossy = interceptedCollection(b.collection, async (target, args) => {
      const reply = await target.findOneAndUpdate(...args);
      if (++joins > 1) return reply;
      await replyLost;
      throw new MongoNetworkError('connection reset before the reply');
    });
    const acquirer = acquirerOver(lossy, b.waiters);
    const first = await a.acquirer.acquire(request('retried'));
    let got: LineHold | undefined;
    const waiting = acquirer
      .acquire(request('retried', { ttlMs: 400, timeoutMs: 10_000 }))
      .then((hold) => (got = hold));
    await sleep(100);
    // b's first entry leads, and b's stream says so; unrenewed (no reply), it runs out.
    await a.acquirer.release(first);
    await sleep(700);
    const second = await a.acquirer.acquire(request('retried'));
    expect(second.leaseEnd).toBeGreaterThan(performance.now());
    // b's join fails now, and b joins again by the same token: behind a's second entry.
    loseReply();
    await sleep(500);
    expect(joins).toBeGreaterThan(1);
    expect(got).toBeUndefined();
    await a.acquirer.release(second);
    await waiting;
    expect(got!.fence).toBeGreaterThan(second.fence);
  });

  it('a join of a token given up after its entry ran out is left once it lands late', async () => {
    const a = await service('a');
    const b = await service('b');
    let letLand!: () => void;
    const mayLand = new Promise<void>((resolve) => (letLand = resolve));
    const sent: { pipeline: unknown; token: string | undefined }[] = [];
    let renewals = 0;
    // b's first join goes on past its bound and lands when the test says; b's first renewal is
    // answered after b's entry ran out.
    const slow = interceptedCollection(b.collection, async (target, args) => {
      const command = commandOf(args);
      sent.push(command);
      if (sent.length === 1) await mayLand;
      if (command.pipeline === RENEW_PIPELINE && ++renewals === 1) await sleep(500);
      return target.findOneAndUpdate(...args);
    });
    const acquirer = acquirerOver(slow, b.waiters, { operationTimeoutMs: 1_000 });
    const held = await a.acquirer.acquire(request('late'));
    const waiting = acquirer.acquire(request('late', { ttlMs: 400, timeoutMs: 10_000 }));
    // The first join's retry placed b; its entry ran out unrenewed; b joined again by a new token.
    const firstToken = () => sent[0].token;
    await eventually(() => sent.filter((command) => command.token !== firstToken()).length > 0);
    const lateJoins = sent.filter((command) => command.token === firstToken()).length;
    expect(lateJoins).toBeGreaterThan(1);
    letLand();
    // Left once it landed: nobody's entry must not wait out its lease in line.
    await eventually(
      () =>
        sent.some(
          (command) => command.pipeline === LEAVE_PIPELINE && command.token === firstToken(),
        ),
      2_000,
    );
    await a.acquirer.release(held);
    await acquirer.release(await waiting);
  });

  // L18 (test/faults/FINDINGS.md): mongod fixes a command's $$NOW before it waits out a write
  // conflict, so a renewal can land late with an old clock, after the entry's lease had ended,
  // and bring it back to life ahead of callers let through meanwhile. A renewal answered after
  // our entry's lease ended is therefore no proof that the entry lived on.
  it('a waiter whose renewal is answered after its lease ended leaves that entry and joins again', async () => {
    const [a, b] = [await service('a'), await service('b')];
    const sent: { pipeline: unknown; token: string | undefined }[] = [];
    const slow = interceptedCollection(b.collection, async (target, args) => {
      const command = commandOf(args);
      sent.push(command);
      if (command.pipeline === RENEW_PIPELINE && sent.length === 2) {
        // Past the entry's 400 ms lease; a renewal with an old clock lands first and brings it
        // back, then this one finds it live.
        await sleep(700);
        await target.updateOne({ _id: 'revived', 'line.t': command.token }, [
          { $set: { line: { $map: { input: '$line', in: revivedIf(command.token) } } } },
        ]);
      }
      return target.findOneAndUpdate(...args);
    });
    const acquirer = acquirerOver(slow, b.waiters);
    const held = await a.acquirer.acquire(request('revived'));
    const waiting = acquirer.acquire(request('revived', { ttlMs: 400, timeoutMs: 10_000 }));
    const first = () => sent[0].token;
    // Left, and joined again by a new token.
    await eventually(
      () =>
        sent.some((command) => command.pipeline === LEAVE_PIPELINE && command.token === first()),
      3_000,
    );
    await a.acquirer.release(held);
    const hold = await waiting;
    expect(hold.token).not.toBe(first());
    await acquirer.release(hold);
  });

  // From review of that rule: a lease was counted from the call, which may first wait in call
  // order behind another caller here, and so looked over before its first renewal.
  it('counts a lease from its join, not from a wait in call order before it', async () => {
    const a = await service('a');
    const b = await service('b');
    const sent: { pipeline: unknown; token: string | undefined }[] = [];
    let joins = 0;
    // b's first caller's join is answered 1.5 s late; the second caller joins after it.
    const slowFirst = interceptedCollection(b.collection, async (target, args) => {
      const command = commandOf(args);
      sent.push(command);
      const join = command.pipeline !== RENEW_PIPELINE && command.pipeline !== LEAVE_PIPELINE;
      if (join && ++joins === 1) await sleep(1_500);
      return target.findOneAndUpdate(...args);
    });
    const acquirer = acquirerOver(slowFirst, b.waiters);
    const held = await a.acquirer.acquire(request('in-order'));
    const first = acquirer
      .acquire(request('in-order', { ttlMs: 1_000, timeoutMs: 1_000 }))
      .catch(() => undefined);
    const second = acquirer.acquire(request('in-order', { ttlMs: 1_000, timeoutMs: 10_000 }));
    await first;
    await sleep(800);
    // The second caller joined at about 1 s and renewed in time: its entry stays.
    const secondToken = sent.filter(
      (c) => c.pipeline !== RENEW_PIPELINE && c.token !== sent[0].token,
    )[0]?.token;
    expect(secondToken).toBeDefined();
    expect(sent.some((c) => c.pipeline === LEAVE_PIPELINE && c.token === secondToken)).toBe(false);
    await a.acquirer.release(held);
    const hold = await second;
    expect(hold.token).toBe(secondToken);
    await acquirer.release(hold);
  });

  it("a holder's renewal does not keep an entry of its token made again after its own was removed", async () => {
    const [a, b] = [await service('a', false), await service('b', false)];
    const held = await a.acquirer.acquire(request('remade'));
    // An operator frees the key; another holds it and leaves; then a join of a's call, late
    // on its way, makes a's token's entry again: it leads, with a later fence.
    await forceReleaseLine(a.collection, 'remade', settings.idleRetentionMs);
    await b.acquirer.release(await b.acquirer.acquire(request('remade')));
    const remade = await joinLine(a.collection, {
      key: 'remade',
      token: held.token,
      holderId: 'a',
      ttlMs: 30_000,
      kind: { mode: 'exclusive' },
      onlyIfHolds: false,
      idleRetentionMs: settings.idleRetentionMs,
    });
    expect(remade).toMatchObject({ joined: true, holds: true });
    // a's lock was lost at the forced release: its renewal must say so.
    expect(await a.acquirer.renew(held, 30_000)).toBeUndefined();
  });
});

it('a wait ends at its deadline even while its renewal gets no answer', async () => {
  const a = await service('a', false);
  const b = await service('b', false);
  // b's renewals never answer (a store that stopped replying); its join does.
  const silent = interceptedCollection(b.collection, (target, args) =>
    args[1] === RENEW_PIPELINE ? new Promise(() => undefined) : target.findOneAndUpdate(...args),
  );
  const acquirer = acquirerOver(silent, new LineWaiters());
  await a.acquirer.acquire(request('silent'));
  const startedAt = performance.now();
  // MongoDB's silence, not the holder, is why it fails: in line, but its last command unanswered.
  await expect(
    acquirer.acquire(request('silent', { ttlMs: 300, timeoutMs: 400 })),
  ).rejects.toBeInstanceOf(LockStoreUnavailableError);
  expect(performance.now() - startedAt).toBeLessThan(1_500);
});
