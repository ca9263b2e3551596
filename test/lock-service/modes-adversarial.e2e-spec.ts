// Adversarial review of shared/exclusive locks and semaphores. Each test under "defects found
// in review" reproduces a broken promise that a review of the old engine (v1) found (the
// comment above it names the promise); engine v2 keeps each one, and they stay as regression
// tests. Tests under "holds" pin down behaviour that survived the attack.
import { Long } from 'mongodb';
import { firstValueFrom, take, toArray } from 'rxjs';
import type { LockHandle, LockService } from '../../lib';
import type { LockEvent } from '../../lib/interfaces';
import { InvalidLockOptionsError, LockLostError, LockNotAcquiredError } from '../../lib/errors';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { eventually, LockTestKit, sleep } from './lock-test-kit';
import { canTake, settleWithin } from './adversarial/kit';
import { rawLockOf, type RawLock, liveEntries } from './adversarial/modes-kit';

jest.setTimeout(60_000);

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** A key whose line is full: 1000 live shared entries (the cap), written directly. */
async function insertFullKey(kit: LockTestKit, key: string) {
  const client = await kit.client();
  const now = Date.now();
  const line = Array.from({ length: 1000 }, (_, i) => ({
    t: `ghost-${i}`,
    f: Long.fromNumber(now + i),
    e: new Date(now + 60_000),
    h: 'ghost',
    m: 's',
  }));
  const locks = client
    .db(kit.mongo.dbName)
    .collection<{ _id: string } & RawLock>(`${kit.collectionName}_line`);
  await locks.insertOne({
    _id: key,
    f: Long.fromNumber(now + 999),
    line,
    lead: null,
    gcAt: new Date(now + 120_000),
  });
  return locks;
}

describe('modes, adversarial: defects found in review, fixed (regression tests)', () => {
  const kit = LockTestKit.forSuite();

  // WAS A DEFECT in v1 (a lost wake-up): when the first of a process's waiters for a key gave up
  // (timeout or abort) without the key, the next waiter of that process did not look again
  // until a later timer. With modes, waiters of one key no longer want the same thing: a shared
  // waiter behind a local exclusive one can have the key as soon as the exclusive one leaves.
  it('a shared waiter queued behind a local exclusive waiter that times out acquires at once', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const reader = await a.acquire('q:local', { mode: 'shared', ttlMs: 20_000 });
    const writer = b.acquire('q:local', { timeoutMs: 400 }).catch((e: unknown) => e);
    await eventually(() => b.diagnostics.waiters === 1);
    const second = settleWithin(b.acquire('q:local', { mode: 'shared', timeoutMs: 3_000 }), 4_000);
    expect(await writer).toBeInstanceOf(LockNotAcquiredError);
    const got = await second;
    if (got.status === 'resolved') await (got.value as LockHandle).release();
    await reader.release();
    expect(got.error).toBeUndefined();
    expect(got.status).toBe('resolved');
    // A lost wake-up sleeps until its entry's renewal (a third of its 30 s lease) or the
    // reader's lease end: the 3 s timeout runs out first (rejected), over this bound.
    expect(got.ms).toBeLessThan(400 + LOAD_SLACK_MS);
  });

  // WAS A DEFECT in v1 (a lost wake-up across processes): the process whose exclusive waiter
  // gave up still held back the readers of other processes while another of its waiters
  // remained, and those readers were not told when it stopped: they slept until a later timer.
  it('a shared waiter elsewhere, held back by an exclusive waiter that gave up, acquires at once', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const c = await kit.service();
    const reader = await a.acquire('q:remote', { mode: 'shared', ttlMs: 20_000 });
    // Long enough to outlast the steps below on a loaded machine: B's reader and C's must join
    // the line while B's writer is still in it.
    const writerTimeoutMs = 3_000;
    let writerGaveUp = false;
    const writer = b
      .acquire('q:remote', { timeoutMs: writerTimeoutMs })
      .catch((e: unknown) => e)
      .finally(() => (writerGaveUp = true));
    await eventually(async () => (await a.inspect('q:remote'))?.waiting === 1);
    // B still wants the key, in shared mode, after its writer gives up.
    const bReader = settleWithin(
      b.acquire('q:remote', { mode: 'shared', timeoutMs: 8_000 }),
      9_000,
    );
    // C's reader is held back by B's exclusive entry in the line.
    await expect(c.tryAcquire('q:remote', { mode: 'shared' })).resolves.toBeNull();
    const cReader = settleWithin(
      c.acquire('q:remote', { mode: 'shared', timeoutMs: 8_000 }),
      9_000,
    );
    // B's writer and both readers wait in line (with the writer gone, the readers would hold).
    let allInLine = false;
    await eventually(
      async () => writerGaveUp || (allInLine = (await a.inspect('q:remote'))?.waiting === 3),
    );
    expect(allInLine).toBe(true);
    expect(await writer).toBeInstanceOf(LockNotAcquiredError);
    const got = await cReader;
    const bGot = await bReader;
    for (const s of [got, bGot])
      if (s.status === 'resolved') await (s.value as LockHandle).release();
    await reader.release();
    expect(got.error).toBeUndefined();
    expect(got.status).toBe('resolved');
    // A lost wake-up sleeps until its entry's renewal (a third of its 30 s lease) or the
    // reader's lease end: the 8 s timeout runs out first (rejected), over this bound.
    expect(got.ms).toBeLessThan(writerTimeoutMs + LOAD_SLACK_MS);
  });

  // The same lost wake-up with a semaphore: a wide request first in a process times out; the
  // narrow request of that process behind it (which fits) must try at once.
  it('a narrow permit request behind a local wide one that times out acquires at once', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const one = await a.acquire('q:sem', { permits: 2, ttlMs: 20_000 });
    const wide = b
      .acquire('q:sem', { permits: 2, weight: 2, timeoutMs: 400 })
      .catch((e: unknown) => e);
    await eventually(() => b.diagnostics.waiters === 1);
    const narrow = settleWithin(b.acquire('q:sem', { permits: 2, timeoutMs: 3_000 }), 4_000);
    expect(await wide).toBeInstanceOf(LockNotAcquiredError);
    const got = await narrow;
    if (got.status === 'resolved') await (got.value as LockHandle).release();
    await one.release();
    expect(got.status).toBe('resolved');
    // A lost wake-up sleeps until its entry's renewal (a third of its 30 s lease) or the
    // holder's lease end: the 3 s timeout runs out first (rejected), over this bound.
    expect(got.ms).toBeLessThan(400 + LOAD_SLACK_MS);
  });
});

describe('modes, adversarial: fixed during the review (regression tests)', () => {
  const kit = LockTestKit.forSuite();

  // WAS A DEFECT in v1: after releaseScope, the holder's own later release was taken for a
  // success, so a remote reader revoked in mid-work never learned it and withLock resolved.
  it('a remote shared holder revoked by releaseScope learns it at its release (withLock rejects)', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const started = deferred();
    const gate = deferred();
    const run = b.withLock(
      'scope:shared',
      async () => {
        started.resolve();
        await gate.promise;
        return 'done';
      },
      { mode: 'shared', scope: 'tenant:1', ttlMs: 20_000 },
    );
    await started.promise;
    expect(await a.releaseScope('tenant:1')).toBe(1);
    // The key is free now (a writer could take it at any moment): the reader is unprotected.
    expect((await a.inspect('scope:shared'))?.held).toBe(false);
    gate.resolve();
    await expect(run).rejects.toBeInstanceOf(LockLostError);
  });

  // WAS A DEFECT in v1: freeing the last live entries by releaseScope left the idle document
  // with no deletion time (`gcAt`), so it was never deleted. On v2 every join sets `gcAt` past
  // its lease plus `idleRetentionMs`, and releaseScope must leave it there.
  it('releaseScope of the last shared holder leaves the idle document due for deletion', async () => {
    const a = await kit.service({ idleRetentionMs: 1_000 });
    const b = await kit.service({ idleRetentionMs: 1_000 });
    const joinedAt = Date.now();
    const held = await b.acquire('scope:gc', { mode: 'shared', scope: 'tenant:gc', ttlMs: 20_000 });
    expect(await a.releaseScope('tenant:gc')).toBe(1);
    const doc = await rawLockOf(kit, 'scope:gc');
    await held.release().catch(() => undefined);
    expect(doc?.line).toEqual([]);
    // Due once the removed entry's lease (20 s) and the idle retention (1 s) have passed.
    expect(doc?.gcAt).toBeInstanceOf(Date);
    expect((doc!.gcAt as Date).getTime()).toBeLessThan(joinedAt + 21_000 + LOAD_SLACK_MS);
  });

  // WAS A DEFECT in v1: the first shared acquisition of a fresh key created its document in a
  // form that events$ did not report.
  it('events$ reports the first shared acquisition of a fresh key', async () => {
    const a = await kit.service();
    const watcher = await kit.service();
    const seen: LockEvent[] = [];
    const sub = watcher.events$.subscribe((event) => seen.push(event));
    await eventually(() => watcher.diagnostics.streamEstablished);
    const reader = await a.acquire('ev:fresh', { mode: 'shared', ttlMs: 20_000 });
    const second = await a.acquire('ev:fresh', { mode: 'shared', ttlMs: 20_000 });
    // The second acquisition (an update of the document) is reported...
    await eventually(
      () => seen.some((e) => e.key === 'ev:fresh' && e.fence === second.fence),
      3_000,
    );
    sub.unsubscribe();
    await Promise.all([reader.release(), second.release()]);
    // ...and so is the first one (the insert), before it.
    expect(
      seen.filter((e) => e.key === 'ev:fresh' && e.type === 'acquired').map((e) => e.fence),
    ).toEqual([reader.fence, second.fence]);
  });
});

describe('modes, adversarial: holds', () => {
  const kit = LockTestKit.forSuite();

  it('concurrent shared and exclusive tryAcquire from several services never overlap', async () => {
    const services = await Promise.all([1, 2, 3, 4].map(() => kit.service()));
    const held = { exclusive: 0, shared: 0 };
    const violations: string[] = [];
    const fences: bigint[] = [];
    let maxReleasedFence = 0n;
    const worker = async (locks: LockService, seed: number) => {
      for (let i = 0; i < 40; i += 1) {
        const shared = (i + seed) % 3 !== 0;
        const releasedBefore = maxReleasedFence;
        const handle = await locks.tryAcquire('race:rw', {
          ...(shared ? { mode: 'shared' as const } : {}),
          ttlMs: 10_000,
        });
        if (!handle) continue;
        if (handle.fence <= releasedBefore)
          violations.push(`fence ${handle.fence} <= ${releasedBefore}`);
        fences.push(handle.fence);
        if (shared) held.shared += 1;
        else held.exclusive += 1;
        if (held.exclusive > 1 || (held.exclusive === 1 && held.shared > 0))
          violations.push(`overlap: ${held.exclusive} exclusive, ${held.shared} shared`);
        await sleep(i % 4);
        // Off the books before the release is sent: the server frees it after this.
        if (shared) held.shared -= 1;
        else held.exclusive -= 1;
        await handle.release();
        if (handle.fence > maxReleasedFence) maxReleasedFence = handle.fence;
      }
    };
    await Promise.all(services.map((locks, seed) => worker(locks, seed)));
    expect(violations).toEqual([]);
    expect(new Set(fences.map(String)).size).toBe(fences.length);
    expect(fences.length).toBeGreaterThan(20);
    // Every call left the line: nothing is left for its lease to end.
    expect(liveEntries(await rawLockOf(kit, 'race:rw'))).toEqual([]);
  });

  it('concurrent weighted permit requests never exceed the permits', async () => {
    const services = await Promise.all([1, 2, 3, 4].map(() => kit.service()));
    let used = 0;
    let peak = 0;
    const violations: string[] = [];
    const worker = async (locks: LockService, seed: number) => {
      for (let i = 0; i < 30; i += 1) {
        const weight = ((i + seed) % 3) + 1;
        const handle = await locks.tryAcquire('race:sem', { permits: 4, weight, ttlMs: 10_000 });
        if (!handle) continue;
        used += weight;
        peak = Math.max(peak, used);
        if (used > 4) violations.push(`${used} permits in use`);
        await sleep(i % 3);
        used -= weight;
        await handle.release();
      }
    };
    await Promise.all(services.map((locks, seed) => worker(locks, seed)));
    expect(violations).toEqual([]);
    expect(peak).toBeGreaterThan(1);
  });

  it('waiting semaphore requests under contention: at most the permits, everyone served', async () => {
    const services = await Promise.all([1, 2, 3].map(() => kit.service()));
    let used = 0;
    const violations: string[] = [];
    const served: number[] = [];
    await Promise.all(
      services.flatMap((locks, s) =>
        [1, 2, 3, 4].map(async (n) => {
          const weight = ((n + s) % 2) + 1;
          const handle = await locks.acquire('wait:sem', { permits: 3, weight, timeoutMs: 20_000 });
          used += weight;
          if (used > 3) violations.push(`${used}`);
          await sleep(30);
          used -= weight;
          await handle.release();
          served.push(weight);
        }),
      ),
    );
    expect(violations).toEqual([]);
    expect(served).toHaveLength(12);
  });

  it('fences strictly increase across exclusive, shared and semaphore grants of one key', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const seen: bigint[] = [];
    for (let i = 0; i < 6; i += 1) {
      const x = await a.acquire('fence:k');
      seen.push(x.fence);
      await x.release();
      const r1 = await a.acquire('fence:k', { mode: 'shared' });
      const r2 = await b.acquire('fence:k', { mode: 'shared' });
      seen.push(r1.fence, r2.fence);
      await Promise.all([r1.release(), r2.release()]);
    }
    // The document is deleted when idle (here by hand, as the TTL monitor would: not before
    // every lease ended and the clock passed its fence number): still larger.
    const client = await kit.client();
    const locks = client.db(kit.mongo.dbName).collection<RawLock>(`${kit.collectionName}_line`);
    const idle = await rawLockOf(kit, 'fence:k');
    const nextFenceMs = Number(idle?.f) + 1;
    await sleep(Math.max(0, nextFenceMs - Date.now() + 5));
    await locks.deleteMany({});
    const after = await b.acquire('fence:k', { permits: 2 });
    seen.push(after.fence);
    await after.release();
    for (let i = 1; i < seen.length; i += 1) expect(seen[i]).toBeGreaterThan(seen[i - 1]);
  });

  it('a waiting exclusive holder gets the key despite a steady stream of readers from other services', async () => {
    const a = await kit.service();
    const writerSide = await kit.service();
    const readers = await Promise.all([1, 2, 3].map(() => kit.service()));
    const first = await a.acquire('starve:rw', { mode: 'shared', ttlMs: 20_000 });
    let stop = false;
    let grantsAfterWriterQueued = 0;
    let writerQueued = false;
    const churn = readers.map(async (locks, i) => {
      while (!stop) {
        const r = await locks.tryAcquire('starve:rw', { mode: 'shared', ttlMs: 5_000 });
        if (r) {
          if (writerQueued) grantsAfterWriterQueued += 1;
          await sleep(20 + i * 5);
          await r.release();
        } else await sleep(5);
      }
    });
    await sleep(200);
    const started = performance.now();
    const writer = writerSide.acquire('starve:rw', { timeoutMs: 8_000 });
    await eventually(async () => (await a.inspect('starve:rw'))?.waiting === 1);
    writerQueued = true;
    await sleep(100);
    const countedAtRelease = grantsAfterWriterQueued;
    await first.release();
    const w = await writer;
    stop = true;
    await Promise.all(churn);
    await w.release();
    // A starved writer runs out its 8 s timeout (rejected), over this bound.
    expect(performance.now() - started).toBeLessThan(3_000 + LOAD_SLACK_MS);
    // Once the writer's entry is in line, no later reader gets in.
    expect(countedAtRelease).toBe(0);
  });

  it('a wide permit request is not overtaken for ever by narrow ones', async () => {
    const a = await kit.service();
    const wideSide = await kit.service();
    const narrow = await Promise.all([1, 2].map(() => kit.service()));
    const first = await a.acquire('starve:sem', { permits: 3, ttlMs: 20_000 });
    let stop = false;
    const churn = narrow.map(async (locks) => {
      while (!stop) {
        const r = await locks.tryAcquire('starve:sem', { permits: 3, ttlMs: 5_000 });
        if (r) {
          await sleep(30);
          await r.release();
        } else await sleep(5);
      }
    });
    await sleep(200);
    const wide = wideSide.acquire('starve:sem', { permits: 3, weight: 3, timeoutMs: 8_000 });
    await sleep(300);
    await first.release();
    const w = await wide;
    stop = true;
    await Promise.all(churn);
    expect(w.permits).toEqual({ of: 3, held: 3 });
    await w.release();
  });

  it('a writer wakes on the release of the last reader at once, and at the end of a dead reader lease', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const r1 = await a.acquire('wake:rw', { mode: 'shared', ttlMs: 30_000 });
    const r2 = await a.acquire('wake:rw', { mode: 'shared', ttlMs: 30_000 });
    const writer = settleWithin(b.acquire('wake:rw', { timeoutMs: 5_000 }), 6_000);
    // In line behind the readers: their releases can reach it only as news.
    await eventually(async () => (await a.inspect('wake:rw'))?.waiting === 1);
    await r1.release();
    const freedAt = performance.now();
    await r2.release();
    const got = await writer;
    expect(got.status).toBe('resolved');
    // Not woken, it waits for its entry's renewal (10 s): its 5 s timeout runs out first.
    expect(performance.now() - freedAt).toBeLessThan(LOAD_SLACK_MS);
    await (got.value as LockHandle).release();
    // A reader that never releases (crashed: no renewal): its own lease ends it.
    await a.acquire('wake:dead', { mode: 'shared', ttlMs: 1_000, renew: false });
    const started = performance.now();
    const w2 = await b.acquire('wake:dead', { timeoutMs: 5_000 });
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThan(700);
    // The dead lease ends 1 s after it began; missed, the wait runs to its 5 s timeout.
    expect(waited).toBeLessThan(1_000 + LOAD_SLACK_MS);
    await w2.release();
  });

  it("changeStreams: 'off' hands a semaphore permit over by polling", async () => {
    const a = await kit.service();
    const b = await kit.service({
      changeStreams: 'off',
      pollIntervalMs: 20,
      maxPollIntervalMs: 200,
    });
    const p1 = await a.acquire('poll:sem', { permits: 2, ttlMs: 30_000 });
    const p2 = await a.acquire('poll:sem', { permits: 2, ttlMs: 30_000 });
    const waiting = settleWithin(b.acquire('poll:sem', { permits: 2, timeoutMs: 5_000 }), 6_000);
    // In line: only a poll can show it the freed permit.
    await eventually(async () => (await a.inspect('poll:sem'))?.waiting === 1);
    await p1.release();
    const freedAt = performance.now();
    const got = await waiting;
    expect(got.status).toBe('resolved');
    // Polls are at most 200 ms apart; a poll that misses the permit runs to the 5 s timeout.
    expect(performance.now() - freedAt).toBeLessThan(200 + LOAD_SLACK_MS);
    await Promise.all([p2.release(), (got.value as LockHandle).release()]);
  });

  it('an exclusive waiter that gives up (timeout, abort, unsubscribed acquire$) frees the readers behind it at once', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const c = await kit.service();
    const reader = await a.acquire('leave:rw', { mode: 'shared', ttlMs: 20_000 });
    // acquire$, unsubscribed while waiting.
    const sub = b.acquire$('leave:rw', { timeoutMs: 10_000 }).subscribe();
    await eventually(async () => (await a.inspect('leave:rw'))?.waiting === 1);
    const follower = settleWithin(
      c.acquire('leave:rw', { mode: 'shared', timeoutMs: 5_000 }),
      6_000,
    );
    // In line behind the writer: only news of its leave lets the follower through.
    await eventually(async () => (await a.inspect('leave:rw'))?.waiting === 2);
    const leftAt = performance.now();
    sub.unsubscribe();
    const got = await follower;
    expect(got.status).toBe('resolved');
    // Held back by the writer's entry left in line, the follower runs to its 5 s timeout.
    expect(performance.now() - leftAt).toBeLessThan(800 + LOAD_SLACK_MS);
    await (got.value as LockHandle).release();
    // An aborted signal.
    const controller = new AbortController();
    const aborted = b
      .acquire('leave:rw', { timeoutMs: 10_000, signal: controller.signal })
      .catch((e: unknown) => e);
    await eventually(async () => (await a.inspect('leave:rw'))?.waiting === 1);
    controller.abort(new Error('stop'));
    expect(await aborted).toBeInstanceOf(Error);
    await eventually(async () => (await a.inspect('leave:rw'))?.waiting === 0, 5_000);
    const again = await c.tryAcquire('leave:rw', { mode: 'shared' });
    expect(again).not.toBeNull();
    await Promise.all([again?.release(), reader.release()]);
  });

  it('acquire$ in shared mode emits a shared handle', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const r = await a.acquire('obs:k', { mode: 'shared' });
    const handles = await firstValueFrom(
      b.acquire$('obs:k', { mode: 'shared' }).pipe(take(1), toArray()),
    );
    expect(handles[0].mode).toBe('shared');
    await Promise.all([handles[0].release(), r.release()]);
  });

  it('releasing one holder changes only its own entry; a renew after expiry fails', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const r1 = await a.acquire('entry:k', { mode: 'shared', ttlMs: 20_000 });
    const r2 = await b.acquire('entry:k', { mode: 'shared', ttlMs: 20_000 });
    const r3 = await b.acquire('entry:k', { mode: 'shared', ttlMs: 1_000, renew: false });
    const before = await rawLockOf(kit, 'entry:k');
    expect(before!.line).toHaveLength(3);
    await r2.release();
    const after = await rawLockOf(kit, 'entry:k');
    // r2's entry (the second) is gone; the others are as they were.
    expect(after!.line).toEqual([before!.line[0], before!.line[2]]);
    await sleep(1_300);
    await expect(r3.extend(5_000)).rejects.toBeInstanceOf(LockLostError);
    expect(liveEntries(await rawLockOf(kit, 'entry:k'))).toHaveLength(1);
    await r1.release();
  });

  it('conflicting forms are refused while waiting too, naming the key, and write nothing', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const sem = await a.acquire('form:k', { permits: 2, weight: 2, ttlMs: 20_000 });
    const before = await rawLockOf(kit, 'form:k');
    for (const options of [
      { permits: 3, timeoutMs: 2_000 },
      { mode: 'shared' as const, timeoutMs: 2_000 },
      { timeoutMs: 2_000 },
    ]) {
      const error = await b.acquire('form:k', options).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect(String((error as Error).message)).toContain('form:k');
    }
    expect(await rawLockOf(kit, 'form:k')).toEqual(before);
    await sem.release();
    // Multi-key: the later key's conflict gives back the earlier one.
    const x = await a.acquire('form:z', { permits: 2 });
    await expect(
      b.acquire(['form:y', 'form:z'], { mode: 'shared', timeoutMs: 1_000 }),
    ).rejects.toBeInstanceOf(InvalidLockOptionsError);
    expect(await canTake(a, 'form:y')).toBe(true);
    await x.release();
    await expect(a.acquire('form:w', { permits: 1_001 })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(a.acquire('form:w', { permits: 2, weight: 3 })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
  });

  it('multi-key shared acquisitions coexist and exclude a writer of any of their keys', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const c = await kit.service();
    const r1 = await a.acquire(['mk:a', 'mk:b'], { mode: 'shared' });
    const r2 = await b.acquire(['mk:b', 'mk:a'], { mode: 'shared' });
    expect(r1.mode).toBe('shared');
    await expect(c.tryAcquire(['mk:b', 'mk:c'])).resolves.toBeNull();
    expect(await canTake(c, 'mk:c')).toBe(true); // given back
    const writer = c.acquire(['mk:a', 'mk:c'], { timeoutMs: 5_000 });
    await sleep(100);
    await r1.release();
    await r2.release();
    const w = await writer;
    await expect(a.tryAcquire('mk:a', { mode: 'shared' })).resolves.toBeNull();
    await w.release();
  });

  it('withLock in shared mode runs readers side by side', async () => {
    const a = await kit.service();
    const b = await kit.service();
    let inside = 0;
    let peak = 0;
    const both = deferred();
    const read = (locks: LockService) =>
      locks.withLock(
        'wl:shared',
        async (handle) => {
          expect(handle.mode).toBe('shared');
          inside += 1;
          peak = Math.max(peak, inside);
          if (inside === 2) both.resolve();
          await Promise.race([both.promise, sleep(3_000)]);
          inside -= 1;
        },
        { mode: 'shared', timeoutMs: 5_000 },
      );
    await Promise.all([read(a), read(b)]);
    expect(peak).toBe(2);
  });

  it('releaseScope counts shared and permit holders here and elsewhere, once each', async () => {
    const a = await kit.service();
    const b = await kit.service();
    await a.acquire('cnt:r', { mode: 'shared', scope: 's1' });
    await b.acquire('cnt:r', { mode: 'shared', scope: 's1' });
    await b.acquire('cnt:s', { permits: 3, weight: 2, scope: 's1' });
    await b.acquire('cnt:x', { scope: 's1' });
    const other = await b.acquire('cnt:s', { permits: 3, scope: 's2' });
    expect(await a.releaseScope('s1')).toBe(4);
    expect(await a.releaseScope('s1')).toBe(0);
    expect(liveEntries(await rawLockOf(kit, 'cnt:s'))).toHaveLength(1);
    await other.release();
  });

  it('a revoked remote exclusive holder gets LockLostError from withLock', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const started = deferred();
    const gate = deferred();
    const run = b.withLock(
      'scope:excl',
      async () => {
        started.resolve();
        await gate.promise;
      },
      { scope: 'tenant:x', ttlMs: 20_000 },
    );
    await started.promise;
    expect(await a.releaseScope('tenant:x')).toBe(1);
    gate.resolve();
    await expect(run).rejects.toBeInstanceOf(LockLostError);
  });

  it('the cap: a 1001st call is refused at once, waiting or not, with a clear error and nothing written', async () => {
    const a = await kit.service();
    const locks = await insertFullKey(kit, 'cap:pin');
    const before = await rawLockOf(kit, 'cap:pin');
    for (const timeoutMs of [0, 2_000]) {
      const started = performance.now();
      const error = await a
        .acquire('cap:pin', { mode: 'shared', timeoutMs })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(String((error as Error).message)).toMatch(
        /cap:pin.*1000 calls already hold or wait for it/,
      );
      // At once: a wait would run to its 2 s timeout.
      expect(performance.now() - started).toBeLessThan(LOAD_SLACK_MS);
      expect(await rawLockOf(kit, 'cap:pin')).toEqual(before);
    }
    // Every entry goes away: the key is free, nothing of the refused calls is left in line.
    await locks.updateOne({ _id: 'cap:pin' }, { $set: { line: [] } });
    const writer = await a.tryAcquire('cap:pin');
    expect(writer).not.toBeNull();
    await writer?.release();
  });
});
