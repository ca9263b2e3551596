import type { Collection } from 'mongodb';
import { LockLostError, LockNotAcquiredError } from '../../lib/errors';
import type { LockHandle, LockService } from '../../lib';
import { RUN_MS } from '../../lib/line-handover';
import type { MongoLockHandle } from '../../lib/lock-handle';
import { LockTestKit, eventually, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

/**
 * Engine v2's hand-over within one process (`localHandOff`, on by default): callers queued
 * behind this process's waiting entry take it over one after another, without a write.
 */
describe('engine v2: hand-over within one process', () => {
  const kit = LockTestKit.forSuite();
  const v2 = (extra: Parameters<LockTestKit['service']>[0] = {}) =>
    kit.service({ engine: 'v2', ...extra });
  /** The lines, by a client connected before each test: a read connects nothing. */
  let lines: Collection;
  beforeEach(async () => {
    lines = (await kit.client()).db(kit.mongo.dbName).collection(`${kit.collectionName}_line`);
  });
  /** The key's line as stored: each entry's holder id, token and fence number. */
  const line = async (key: string) => {
    const doc = await lines.findOne({ _id: key as never });
    const entries = (doc?.line ?? []) as { h: string; t: string; f: unknown }[];
    return { f: String(doc?.f), entries: entries.map(({ h, t, f }) => ({ h, t, f: String(f) })) };
  };
  /**
   * Runs `round` on fresh keys (`${name}-1`, …) until its checks pass. A round tells `took` its
   * window: from when the entry's first holder held to just before the last release that must
   * hand it on. A round that fails after a window over RUN_MS / 2 proved nothing (a loaded
   * machine's pauses may have ended the run: the entry then leaves, not passes), and is redone;
   * one that fails within it fails the test.
   */
  const withinRun = async (
    name: string,
    round: (key: string, took: (ms: number) => void) => Promise<void>,
  ) => {
    const windows: number[] = [];
    for (let i = 1; ; i++) {
      let windowMs = 0;
      try {
        return await round(`${name}-${i}`, (ms) => (windowMs = ms));
      } catch (error) {
        if (windowMs <= RUN_MS / 2) throw error;
        windows.push(Math.round(windowMs));
        if (i < 5) continue;
        throw new Error(
          `each round failed after a window over RUN_MS / 2 (${windows.join(', ')} ms): too ` +
            `slow a machine to tell. The last round's failure: ${String(error)}`,
          { cause: error },
        );
      }
    }
  };

  it('hands the entry to the callers queued behind it in call order, each with the next fence, with no write', async () => {
    const a = await v2();
    const b = await v2();
    await withinRun('batch', async (key, took) => {
      const first = await a.acquire(key);
      const calls = [0, 1, 2, 3].map(() => b.acquire(key, { timeoutMs: 20_000 }));
      await eventually(async () => (await line(key)).entries.length === 2);
      await sleep(200);
      // One entry for the four callers: the first joined, the others queued behind it here.
      const waitingLine = await line(key);
      expect(waitingLine.entries.map((entry) => entry.h)).toEqual([a.holderId, b.holderId]);
      await first.release();
      const fences: bigint[] = [];
      let heldAt = 0;
      for (const [i, call] of calls.entries()) {
        const handle = await call;
        if (i === 0) heldAt = performance.now();
        fences.push(handle.fence);
        // No read here: the run lasts 50 ms from its first holder, and a loaded machine's reads
        // would end it. What the line went through is checked after the last release. The
        // third release makes the last hand-over.
        if (i === calls.length - 2) took(performance.now() - heldAt);
        await handle.release();
      }
      // No join since: the document's fence number is unchanged, so each caller took the entry.
      expect((await line(key)).f).toBe(waitingLine.f);
      expect(fences.map((fence) => fence - fences[0])).toEqual([0n, 1n, 2n, 3n]);
      expect(fences[0]).toBeGreaterThan(first.fence);
      expect((await line(key)).entries).toEqual([]);
    });
  });

  it('passes to a caller who comes while it holds, within its run, with no write', async () => {
    const b = await v2();
    await withinRun('run', async (key, took) => {
      const first = await b.acquire(key);
      const heldAt = performance.now();
      // It comes at once, within the run (RUN_MS from the first holder's start). A follower
      // writes nothing: the line read while it waits is the line once it holds.
      const second = b.acquire(key, { timeoutMs: 20_000 });
      const before = await line(key);
      took(performance.now() - heldAt);
      await first.release();
      const next = await second;
      const held = await line(key);
      await next.release();
      expect(next.fence).toBe(first.fence + 1n);
      expect(held).toEqual(before);
      expect((await line(key)).entries).toEqual([]);
      // The entry has left: a caller now joins the line (following it, it would wait for ever).
      const again = await b.acquire(key, { timeoutMs: 10_000 });
      expect((await line(key)).entries.map((entry) => entry.t)).not.toContain(before.entries[0].t);
      await again.release();
    });
  });

  it('passes among its callers only during its run: after it, they wait behind the other processes', async () => {
    const [a, b, c] = [await v2(), await v2(), await v2()];
    const served: string[] = [];
    const first = await a.acquire('fair');
    const b1 = b.acquire('fair', { timeoutMs: 20_000 });
    await eventually(async () => (await line('fair')).entries.length === 2);
    const fromC = c.withLock('fair', () => void served.push('c'), { timeoutMs: 20_000 });
    await eventually(async () => (await line('fair')).entries.length === 3);
    // Queued behind b's waiting entry, ahead of c's.
    const b2 = b.withLock('fair', () => void served.push('b2'), { timeoutMs: 20_000 });
    await sleep(100);
    await first.release();
    const held1 = await b1;
    served.push('b1');
    // The run ends RUN_MS after b1 began: b2 then joins the line, behind c.
    await sleep(RUN_MS * 3);
    await held1.release();
    await Promise.all([fromC, b2]);
    expect(served).toEqual(['b1', 'c', 'b2']);
  });

  it('ends a run RUN_MS after its first holder began: callers still queued then join the line in call order', async () => {
    const b = await v2();
    const served: number[] = [];
    const first = await b.acquire('order');
    const early = [1, 2].map((i) =>
      b.withLock('order', () => void served.push(i), { timeoutMs: 20_000 }),
    );
    await sleep(RUN_MS * 2);
    // After the run: a later caller must not pass the earlier ones.
    const late = b.withLock('order', () => void served.push(3), { timeoutMs: 20_000 });
    await sleep(100);
    await first.release();
    await Promise.all([...early, late]);
    expect(served).toEqual([1, 2, 3]);
  });

  it("serves a burst of one process's callers in call order, past an entry's 16 fences and its run", async () => {
    const b = await v2();
    const served: number[] = [];
    // 40 callers at once, 20 ms each: every run ends with callers still queued, who join again.
    const calls = Array.from({ length: 40 }, (_, i) =>
      b.withLock(
        'burst',
        async () => {
          served.push(i);
          await sleep(20);
        },
        { timeoutMs: 30_000 },
      ),
    );
    await Promise.all(calls);
    expect(served).toEqual(Array.from({ length: 40 }, (_, i) => i));
  });

  it('a caller queued behind an entry left to run out (expireIn) joins the line when the run ends', async () => {
    const b = await v2();
    const first = (await b.acquire('expiring')) as MongoLockHandle;
    const next = b.acquire('expiring', { timeoutMs: 20_000 });
    await sleep(10);
    const startedAt = Date.now();
    await first.expireIn(1_000);
    const handle = await next;
    // Once the entry ran out, not at its own timeout; in an entry of its own.
    expect(Date.now() - startedAt).toBeLessThan(5_000);
    expect(handle.fence).toBeGreaterThan(first.fence + 1n);
    await handle.release();
  });

  it('hands nothing on once forceRelease was called for the key here', async () => {
    const b = await v2();
    const first = await b.acquire('forced');
    const next = b.acquire('forced', { timeoutMs: 20_000 });
    await sleep(10);
    const forced = b.forceRelease('forced');
    await first.release().catch(() => undefined);
    const handle = await next;
    await forced;
    // Not the removed entry's next fence: an entry of its own, joined after the command.
    expect(handle.fence).toBeGreaterThan(first.fence + 1n);
    await handle.release();
  });

  it('reads a hold from a poll only after a write of its own (a renewal)', async () => {
    const a = await v2();
    const b = await v2({ changeStreams: 'off', pollIntervalMs: 20, maxPollIntervalMs: 50 });
    const gone = await a.acquire('polled', { ttlMs: 30_000 });
    const next = b.acquire('polled', { ttlMs: 20_000, timeoutMs: 20_000 });
    await eventually(async () => (await line('polled')).entries.length === 2);
    await sleep(1_500);
    // The entry ahead goes without a leave (as one ending by time would): a poll finds b first.
    await lines.updateOne({ _id: 'polled' as never }, {
      $pull: { line: { h: a.holderId } },
    } as never);
    const handle = await next;
    // Its lease counts from that write, not from its join 1.5 s earlier (the margin is 1 s).
    expect(handle.expiresAt.getTime() - Date.now()).toBeGreaterThan(18_500);
    await handle.release();
    await gone.release().catch(() => undefined);
  });

  it('a queued caller that gives up sends nothing; when the entry it followed gives up, the next joins itself', async () => {
    const a = await v2();
    const b = await v2();
    const first = await a.acquire('given-up');
    // It waits on past the impatient caller's giving up and the read after it (checked there).
    const leader = b.acquire('given-up', { timeoutMs: 3_000 });
    let leaderSettled = false;
    const settled = () => void (leaderSettled = true);
    leader.then(settled, settled);
    await eventually(async () => (await line('given-up')).entries.length === 2);
    const impatient = b.acquire('given-up', { timeoutMs: 100 });
    const patient = b.acquire('given-up', { timeoutMs: 20_000 });
    const before = await line('given-up');
    await expect(impatient).rejects.toBeInstanceOf(LockNotAcquiredError);
    const after = await line('given-up');
    // Read while the entry it followed still waited (else that entry's leave could show).
    expect(leaderSettled).toBe(false);
    expect(after).toEqual(before);
    await expect(leader).rejects.toBeInstanceOf(LockNotAcquiredError);
    // The patient caller joined in its own entry, and the leader's left.
    await eventually(async () => {
      const { entries } = await line('given-up');
      return entries.length === 2 && entries[1].t !== before.entries[1].t;
    });
    await first.release();
    const handle = await patient;
    expect((await line('given-up')).entries).toHaveLength(1);
    await handle.release();
  });

  it('hands on no lease it does not know to be its own: when it was lost, the followers join themselves', async () => {
    const a = await v2();
    const b = await v2();
    const first = await a.acquire('lost');
    const b1 = b.acquire('lost', { timeoutMs: 20_000, ttlMs: 5_000 });
    await eventually(async () => (await line('lost')).entries.length === 2);
    // A shorter lease than the entry's: handed over, it would start without a renewal.
    const b2 = b.acquire('lost', { timeoutMs: 20_000, ttlMs: 2_000 });
    await sleep(100);
    await first.release();
    const held: LockHandle = await b1;
    // An operator takes the key away; the holder learns it at its renewal.
    expect(await a.forceRelease('lost')).toHaveLength(1);
    await expect(held.extend()).rejects.toBeInstanceOf(LockLostError);
    await held.release().catch(() => undefined);
    const next = await b2;
    // Its own entry, with a fence of a later join, not the lost entry's next one.
    expect(next.fence).toBeGreaterThan(held.fence + 1n);
    expect((await line('lost')).entries.map((entry) => entry.h)).toEqual([b.holderId]);
    await next.release();
  });

  it('hands on no lease shorter than the next caller asked for: it joins the line itself', async () => {
    const b = await v2();
    // Over half of the next caller's 30 s would be left: only the shorter lease declines it.
    const first = await b.acquire('short', { ttlMs: 20_000 });
    const next = b.acquire('short', { ttlMs: 30_000, timeoutMs: 20_000 });
    await sleep(10);
    await first.release();
    const handle = await next;
    // An entry of its own, with the lease it asked for, not the 20 s one's next fence.
    expect(handle.fence).toBeGreaterThan(first.fence + 1n);
    expect(handle.expiresAt.getTime() - Date.now()).toBeGreaterThan(25_000);
    await handle.release();
  });

  it('with localHandOff false, every caller joins the line in its own entry', async () => {
    const a = await v2();
    const b: LockService = await v2({ localHandOff: false });
    const first = await a.acquire('off');
    const calls = [0, 1].map(() => b.acquire('off', { timeoutMs: 20_000 }));
    await eventually(async () => (await line('off')).entries.length === 3);
    await first.release();
    const one = await calls[0];
    await one.release();
    const two = await calls[1];
    expect(two.fence - one.fence).toBeGreaterThanOrEqual(16n);
    await two.release();
  });

  /**
   * b's 16 callers take one entry's 16 places in turn (a's holder makes the entry wait first, so
   * all of them and x0, x1 are queued behind it before it holds). The holder of place
   * `burstAt` releases, and its code at once calls `burst` more on the key (as a batch would):
   * every one of them called after x0 and x1.
   */
  const round = async (a: LockService, b: LockService, key: string, burstAt: number) => {
    const held = await a.acquire(key);
    const served: string[] = [];
    const places = Array.from({ length: 16 }, () => b.acquire(key, { timeoutMs: 20_000 }));
    const early = ['x0', 'x1'].map((name) =>
      b.withLock(key, () => void served.push(name), { timeoutMs: 20_000 }),
    );
    await eventually(
      async () => b.diagnostics.waiters === 18 && (await line(key)).entries.length === 2,
    );
    await held.release();
    let late: Promise<unknown>[] = [];
    const fences: bigint[] = [];
    for (const [i, place] of places.entries()) {
      const handle: LockHandle = await place;
      fences.push(handle.fence);
      served.push(`c${i}`);
      const releasing = handle.release();
      if (i === burstAt) {
        late = Array.from({ length: 3 }, (_, j) =>
          b.withLock(key, () => void served.push(`y${j}`), { timeoutMs: 20_000 }),
        );
      }
      await releasing;
    }
    await Promise.all([...early, ...late]);
    // All 16 places of one entry (else a loaded machine's pause ended the run by time: redo).
    const oneRun = fences.every((fence, i) => fence === fences[0] + BigInt(i));
    return { served, oneRun };
  };

  // Promised (docs/waiting.md): callers still queued when a run ends stay ahead of later callers
  // of the process. Each used to join by itself, at the call order's tail, behind later callers
  // whose step was under way; now the first makes the next entry and the others queue behind it.
  it('serves callers queued behind an entry before callers who called later, when its run ends by its 16th place', async () => {
    const a = await v2();
    const b = await v2();
    const expected = [
      ...Array.from({ length: 16 }, (_, i) => `c${i}`),
      'x0',
      'x1',
      'y0',
      'y1',
      'y2',
    ];
    for (const burstAt of [13, 14]) {
      for (let attempt = 1; ; attempt++) {
        const { served, oneRun } = await round(a, b, `order-${burstAt}-${attempt}`, burstAt);
        if (!oneRun && attempt < 5) continue;
        expect(oneRun).toBe(true);
        expect(served).toEqual(expected);
        break;
      }
    }
  });
});
