// Second adversarial review of shared/exclusive locks and semaphores, after the first review's
// fixes (two-step exclusive attempts, `frees` on a shrinking reservation, withdrawal of a
// reservation of unknown outcome). Each test under "defects found in review" reproduces a
// broken promise the review found; all are fixed and kept as regression tests. Tests under
// "holds" pin down behaviour that survived.
import { Long } from 'mongodb';
import type { LockHandle, LockService } from '../../lib';
import { canEmulate } from '../support/mongo';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { eventually, LockTestKit, sleep } from './lock-test-kit';
import {
  describeWithFailPoints,
  faultTools,
  settleWithin,
  writeConcernTimeout,
} from './adversarial/kit';
import {
  rawLockOf,
  type RawLock,
  liveEntries,
  liveReservations,
  slowAttempts,
} from './adversarial/modes-kit';

jest.setTimeout(60_000);

describeWithFailPoints(
  'modes, adversarial 2: defects found in review, fixed (regression tests)',
  () => {
    const kit = LockTestKit.forSuite();
    const { failPoint, appClient } = faultTools(kit);

    // WAS A DEFECT, fixed (lost wake-up, lib/waiting/key-queue.ts waitForChance, `first = this.head()`): the
    // 7f73fef fix makes the next local waiter try at once when the waiter that attempted leaves,
    // by comparing the head against `first`, taken when waitForChance starts. But when the head
    // leaves WHILE its attempt is in flight (abort, or its deadline: attempt() then settles it
    // before returning), `first` is already the next waiter, so the check never fires: the shared
    // waiter behind a local exclusive one sleeps until the reservation refresh (~6.7 s), the lease
    // end or the safety poll, though the key only has readers. The queue's reservation keeps the
    // exclusive weight (1000) meanwhile and holds back readers in other processes too.
    // Fix: pass the waiter that made the attempt from run() to waitForChance and return when
    // `this.head() !== attempted` (instead of `first`).
    it('a shared waiter behind a local exclusive one that leaves while its attempt is in flight acquires at once', async () => {
      const a = await kit.service();
      const client = await appClient('slow-head');
      const b = await kit.service({ client, safetyPollIntervalMs: 60_000 });
      const r1 = await a.acquire('mid:k', { mode: 'shared', ttlMs: 20_000 });
      const r2 = await a.acquire('mid:k', { mode: 'shared', ttlMs: 20_000 });
      const controller = new AbortController();
      const writer = b
        .acquire('mid:k', { timeoutMs: 10_000, signal: controller.signal })
        .catch((e: unknown) => e);
      await eventually(async () => (await a.inspect('mid:k'))?.waiting === 1);
      const reader = settleWithin(b.acquire('mid:k', { mode: 'shared', timeoutMs: 3_000 }), 4_000);
      await eventually(() => b.diagnostics.waiters === 2);
      // r2's release wakes the writer; its attempt (both round trips) is held on the server.
      const before = await failPoint({ times: 2 }, slowAttempts('slow-head', 500));
      await r2.release();
      await sleep(200);
      const leftAt = performance.now();
      controller.abort(new Error('the caller left'));
      expect(await writer).toBeInstanceOf(Error);
      const got = await reader;
      const waited = performance.now() - leftAt;
      if (got.status === 'resolved') await (got.value as LockHandle).release();
      await r1.release();
      expect(got.error).toBeUndefined();
      expect(got.status).toBe('resolved');
      // The writer's held attempt ends ~800 ms after the abort; the reader then gets in. A
      // missed wake-up waits for the reservation refresh (~6.7 s) or the 60 s poll: the
      // reader's 3 s timeout runs out first (rejected), and it is over this bound too.
      expect(waited).toBeLessThan(800 + LOAD_SLACK_MS);
      expect(await failPoint('off')).toBe(before + 2);
    });

    // WAS A DEFECT, fixed (unknown-outcome handling, lib/store/acquire-attempt.ts attemptPlain
    // `if (reply.owner === request.owner)` and toOutcome `if (!isEntryMode(mode) && reply.owner
    // === owner)`): an exclusive attempt counts as won when the document's `owner` is its token,
    // without checking that the lease is live. Before modes an ended lease's `owner` was either
    // retaken by the plain pipeline (re-granted, live) or replaced by the next holder; now a
    // shared grant leaves `owner` and `expiresAt` in place. So when a win's reply is lost (here:
    // a write-concern error after the write), the lease ends while the call cannot reach the
    // server, and a reader takes the key, the retry (same token) finds the stale `owner` and
    // reports a win with remainingMs 0 and the OLD fence (below the reader's). Only
    // refreshEarlierLeases catches it (a failed renewal): the call rejects at once with "its
    // lease ran out while the other keys were awaited" (there is one key) though 8 s of its
    // timeout remain, instead of waiting for the reader; and its give-back then releases the
    // ended lease by token, which schedules the reader's document for deletion (next defect).
    // Entry modes already refuse this ("Our entry, but its lease ended").
    // Fix: won only if the lease is live (`exclusiveLive` / remainingMs > 0); in attemptPlain,
    // when `owner` is ours but the lease has ended and the key is not plain, return `undefined`
    // so that the full pipeline decides (and reserves).
    it('a retried exclusive attempt whose unheard win ended, after a reader came in, is not reported as won', async () => {
      const client = await appClient('stale-owner');
      const w = await kit.service({ client, pollIntervalMs: 600, maxPollIntervalMs: 600 });
      const r = await kit.service();
      await failPoint({ times: 1 }, writeConcernTimeout('stale-owner'));
      const writer = w.acquire('stale:k', { ttlMs: 1_000, timeoutMs: 10_000 });
      // The first attempt's write is applied; its reply carries the error: W does not know.
      await eventually(async () => (await rawLockOf(kit, 'stale:k'))?.owner != null, 5_000);
      // W's retries reach nothing while its (unheard) lease runs out.
      await failPoint('alwaysOn', {
        failCommands: ['findAndModify'],
        appName: 'stale-owner',
        closeConnection: true,
      });
      await sleep(1_200);
      const reader = await r.acquire('stale:k', { mode: 'shared', ttlMs: 20_000 });
      await failPoint('off');
      // The reader holds the key: the writer must still be waiting.
      const got = await settleWithin(writer, 2_000);
      await reader.release();
      const later = got.status === 'pending' ? await settleWithin(writer, 5_000) : got;
      if (later.status === 'resolved') {
        await (later.value as LockHandle).release().catch(() => undefined);
      }
      expect(got.error).toBeUndefined();
      expect(got.status).toBe('pending');
      // ...and gets the key once the reader is gone.
      expect(later.status).toBe('resolved');
    });

    // WAS A DEFECT, fixed (reservation leak, lib/waiting/key-queue.ts run() `finally` + lib/store/lock-store.ts
    // withdraw): a queue whose last attempt had no outcome withdraws its reservation at once when
    // it ends. But an attempt that timed out on the client may still be on its way (held on a
    // busy server, or its second round trip, the full pipeline, not yet sent): the withdrawal
    // runs first and finds nothing, then the attempt lands and writes the reservation (weight
    // 1000 for an exclusive waiter). Nobody withdraws it: for 10 s it blocks every reader and
    // every exclusive attempt of a key whose holders are gone. Give-backs of wins were made
    // safe against exactly this (inFlightSettled, a second release a command's time later);
    // withdrawals were not. attemptOnce also goes on to its second round trip after the call
    // gave up. Fix: LockStore.withdraw waits for the key's attempts still in flight (`inFlight`)
    // before sending (checked: this test then passes); a single retry "a command's time later"
    // is not enough, as a two-step exclusive attempt can land two command times late.
    it('a waiter that gives up while its attempt is held on the server leaves no reservation behind', async () => {
      const a = await kit.service();
      const c = await kit.service();
      const reader = await a.acquire('wd:k', { mode: 'shared', ttlMs: 20_000 });
      const client = await appClient('slow-attempt');
      const w = await kit.service({ client, operationTimeoutMs: 400 });
      const before = await failPoint({ times: 2 }, slowAttempts('slow-attempt', 700));
      const failed = await w.acquire('wd:k', { timeoutMs: 300 }).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(Error);
      // The held attempt lands ~1 s after the call ended (and withdrew).
      await sleep(1_600);
      const leaked = liveReservations(await rawLockOf(kit, 'wd:k'));
      const other = await c.tryAcquire('wd:k', { mode: 'shared' });
      await other?.release();
      await reader.release();
      // The key has no holder now; a writer is still held back by the leaked reservation.
      const writer = await c.tryAcquire('wd:k');
      await writer?.release();
      expect(leaked).toEqual([]);
      expect(other).not.toBeNull();
      expect(writer).not.toBeNull();
      expect(await failPoint('off')).toBe(before + 2);
    });
  },
);

const describeWithTtlMonitor = canEmulate('ttlMonitorSleepSecs') ? describe : describe.skip;

describeWithTtlMonitor(
  'modes, adversarial 2: a defect needing a fast TTL monitor, fixed (regression test)',
  () => {
    const kit = LockTestKit.forSuite({ ttlMonitorSleepSecs: 1 });

    // WAS A DEFECT, fixed (safety, lib/store/release-lease.ts releasePipeline `gcAt`, and the same in
    // lib/testing/in-memory-lock-collection.ts release): the release (or give-back) of an
    // exclusive lease schedules the document for deletion whenever the token is still `owner`,
    // even when the lease had ended and shared holders took the key since (a shared grant
    // leaves `owner` in place). Entry releases check `othersLive`; this one does not, and
    // renewEntry never clears `gcAt`. The TTL index then deletes the document of a live reader
    // (after idleRetentionMs, here 0), and the next writer takes the key at once, while the
    // reader still believes it holds (it learns the loss only at its next renewal).
    // Fix: in releasePipeline keep `$gcAt` when `$size: LIVE_HOLDERS > 0` (and mirror it in the
    // in-memory store).
    it('the give-back of an ended exclusive lease does not schedule a live reader’s document for deletion', async () => {
      const w = await kit.service({ idleRetentionMs: 0 });
      const r = await kit.service({ idleRetentionMs: 0 });
      const z = await kit.service();
      const stalled = await w.acquire('gc:k', { ttlMs: 1_000, renew: false });
      await sleep(1_200); // the writer stalls past its lease
      const reader = await r.acquire('gc:k', { mode: 'shared', ttlMs: 30_000 });
      await stalled.release().catch(() => undefined); // lost: still given back by token
      await eventually(async () => (await rawLockOf(kit, 'gc:k'))?.owner === null, 3_000);
      const gcAt = (await rawLockOf(kit, 'gc:k'))?.gcAt ?? null;
      await eventually(async () => (await rawLockOf(kit, 'gc:k')) === undefined, 3_000).catch(
        () => undefined,
      );
      const intruder = await z.tryAcquire('gc:k');
      const readerThinksItHolds = !reader.lost;
      await intruder?.release();
      await reader.release().catch(() => undefined);
      expect(readerThinksItHolds).toBe(true);
      expect(gcAt).toBeNull();
      expect(intruder).toBeNull();
    });
  },
);

describe('offline test server: update pipeline semantics', () => {
  const kit = LockTestKit.forSuite();
  let seq = 0;
  async function docs() {
    const client = await kit.client();
    seq += 1;
    return client.db(kit.mongo.dbName).collection<{ _id: number } & RawLock>(`engine_${seq}`);
  }

  // WAS A DEFECT, fixed (packages/mongo-offline/engine/compiled-pipeline.ts, compiled `$unset` of 7f73fef):
  // `$unset` is compiled as "$set to missing" and applied with mingo's removeValue, which
  // does not descend into arrays. MongoDB's `$unset` (an exclusion projection) removes the
  // path from every element of an array along it, and so does the offline server's own
  // uncompiled path (mingo's Aggregator, taken when another stage does not compile): the same
  // `$unset` gives two answers, against the README's promise that the compiled forms return
  // what the Aggregator path did. Fix: run `$unset` with exclusion semantics (descend arrays,
  // path components are field names), or leave `$unset` of dotted paths to mingo's path.
  it('a compiled $unset of a dotted path through an array removes it from every element', async () => {
    const c = await docs();
    const doc = { a: [{ b: 1, x: 1 }, { b: 2 }, 3], c: 1, d: 1 };
    await c.insertMany([
      { _id: 1, ...doc },
      { _id: 2, ...doc },
    ]);
    const unset = { $unset: ['a.b', 'c'] };
    await c.updateOne({ _id: 1 }, [unset]); // compiled
    await c.updateOne({ _id: 2 }, [{ $replaceWith: '$$ROOT' }, unset]); // mingo's Aggregator
    const expected = { a: [{ x: 1 }, {}, 3], d: 1 };
    expect(await c.findOne({ _id: 2 }, { projection: { _id: 0 } })).toEqual(expected);
    expect(await c.findOne({ _id: 1 }, { projection: { _id: 0 } })).toEqual(expected);
  });

  it('holds: one $set reads its input for every field; $unset of top-level and nested document paths', async () => {
    const c = await docs();
    await c.insertOne({ _id: 1, m: { x: 1, y: { z: 1, w: 2 } }, k: 1, s: 'keep' });
    await c.updateOne({ _id: 1 }, [
      { $set: { 'm.x': 2, seen: '$m.x', 'm.y.z': { $add: ['$m.y.z', 1] }, whole: '$m.y' } },
      { $unset: ['k', 'm.y.w'] },
    ]);
    expect(await c.findOne({ _id: 1 }, { projection: { _id: 0 } })).toEqual({
      m: { x: 2, y: { z: 2 } },
      s: 'keep',
      seen: 1,
      whole: { z: 1, w: 2 },
    });
  });
});

describeWithFailPoints('modes, adversarial 2: holds', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('an exclusive win whose reply was lost (write-concern error) is recognised by its retry, and nothing is reserved', async () => {
    const client = await appClient('lost-win');
    const w = await kit.service({ client });
    const other = await kit.service();
    const before = await failPoint({ times: 1 }, writeConcernTimeout('lost-win'));
    const got = await settleWithin(w.acquire('lw:k', { timeoutMs: 3_000 }), 4_000);
    expect(got.status).toBe('resolved');
    const handle = got.value as LockHandle;
    const doc = await rawLockOf(kit, 'lw:k');
    expect(Long.fromValue(doc!.fence).toBigInt()).toBe(handle.fence);
    expect(liveReservations(doc)).toEqual([]);
    await expect(other.tryAcquire('lw:k', { mode: 'shared' })).resolves.toBeNull();
    await handle.release();
    const reader = await other.tryAcquire('lw:k', { mode: 'shared' });
    expect(reader).not.toBeNull();
    expect(reader!.fence).toBeGreaterThan(handle.fence);
    await reader!.release();
    expect(await failPoint('off')).toBe(before + 1); // the win's reply was lost
  });

  it('the plain path never grants past a live reservation; an expired one does not block', async () => {
    const w = await kit.service();
    const client = await kit.client();
    const locks = client
      .db(kit.mongo.dbName)
      .collection<{ _id: string } & RawLock>(kit.collectionName);
    const now = Date.now();
    const reservation = (ms: number) => ({
      weight: 1000,
      since: new Date(now - 1_000),
      expiresAt: new Date(now + ms),
    });
    await locks.insertOne({
      _id: 'plain:k',
      fence: Long.fromNumber(now),
      owner: null,
      waiting: { rlive: reservation(5_000) },
    });
    await expect(w.tryAcquire('plain:k')).resolves.toBeNull();
    await expect(w.tryAcquire('plain:k', { mode: 'shared' })).resolves.toBeNull();
    await locks.updateOne({ _id: 'plain:k' }, { $set: { waiting: { rold: reservation(-1) } } });
    const x = await w.tryAcquire('plain:k');
    expect(x).not.toBeNull();
    await x!.release();
  });

  it('waiting shared and exclusive callers in four services (60 s safety poll): no overlap, fences rise, all served, nothing left reserved', async () => {
    const services = await Promise.all(
      [1, 2, 3, 4].map(() => kit.service({ safetyPollIntervalMs: 60_000 })),
    );
    const held = { exclusive: 0, shared: 0 };
    const violations: string[] = [];
    let lastExclusiveFence = 0n;
    let served = 0;
    const worker = async (locks: LockService, seed: number) => {
      for (let i = 0; i < 8; i += 1) {
        const shared = (i + seed) % 3 !== 0;
        const handle = await locks.acquire('mix:k', {
          ...(shared ? { mode: 'shared' as const } : {}),
          timeoutMs: 8_000,
          ttlMs: 10_000,
        });
        if (shared) held.shared += 1;
        else held.exclusive += 1;
        if (held.exclusive > 1 || (held.exclusive === 1 && held.shared > 0))
          violations.push(`overlap: ${held.exclusive} exclusive, ${held.shared} shared`);
        if (!shared) {
          if (handle.fence <= lastExclusiveFence) violations.push(`fence ${handle.fence}`);
          lastExclusiveFence = handle.fence;
        }
        await sleep(3 + ((i * 7 + seed) % 10));
        if (shared) held.shared -= 1;
        else held.exclusive -= 1;
        await handle.release();
        served += 1;
      }
    };
    const started = performance.now();
    await Promise.all(services.map((locks, seed) => worker(locks, seed)));
    expect(violations).toEqual([]);
    expect(served).toBe(32);
    expect(performance.now() - started).toBeLessThan(8_000);
    const doc = await rawLockOf(kit, 'mix:k');
    expect(liveEntries(doc)).toEqual([]);
    expect(liveReservations(doc)).toEqual([]);
  });
});
