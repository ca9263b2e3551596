import { firstValueFrom } from 'rxjs';
import { filter, take, toArray } from 'rxjs/operators';
import {
  InvalidLockOptionsError,
  LockLostError,
  LockNotAcquiredError,
  LockStoreUnavailableError,
} from '../../lib/errors';
import type { LockService } from '../../lib/lock.service';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { ReplyDelayProxy } from '../support/reply-delay-proxy';
import { passThrough } from '../support/fault-proxy';
import { proxiedServices } from '../leadership/proxied-services';
import { LockTestKit, answerTo, eventually, sleep } from './lock-test-kit';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { FENCES_PER_ENTRY } from '../../lib/store/line/line-document';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';

jest.setTimeout(60_000);

/**
 * `LockService` on engine v2 (`engine: 'v2'`): the public API over the key's line, in the
 * collection `<collectionName>_line`. Raw writes here play another instance or an operator.
 */
describe('LockService on engine v2', () => {
  const kit = LockTestKit.forSuite();
  const v2 = (extra: Parameters<LockTestKit['service']>[0] = {}) =>
    kit.service({ engine: 'v2', ...extra });
  const proxies = proxiedServices(kit, 5_000);
  /** Runs `test` with a v2 service whose replies pass a proxy that can hold one back. */
  const behindReplyDelay = async (
    test: (proxy: ReplyDelayProxy, slow: LockService) => Promise<void>,
  ) => {
    const target = new URL(kit.mongo.uri);
    const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
    await proxy.start();
    try {
      await test(
        proxy,
        await v2({ uri: `mongodb://127.0.0.1:${proxy.port}/?directConnection=true` }),
      );
    } finally {
      await kit.cleanup();
      await proxy.stop();
    }
  };
  const lines = async () =>
    (await kit.client()).db(kit.mongo.dbName).collection(`${kit.collectionName}_line`);

  it('keeps a held lock past its lease by renewal, and its release hands it to the next in line', async () => {
    const a = await v2();
    const b = await v2();
    const handle = await a.acquire('renewed', { ttlMs: 1_000, renew: true });
    await sleep(1_500);
    expect(handle.signal.reason).toBeUndefined();
    expect((await b.inspect('renewed'))?.holderId).toBe(a.holderId);
    const next = b.acquire('renewed', { timeoutMs: 10_000 });
    await eventually(async () => (await b.inspect('renewed'))?.waiting === 1);
    await handle.release();
    const taken = await next;
    expect(taken.fence).toBeGreaterThan(handle.fence);
    expect((await a.inspect('renewed'))?.holderId).toBe(b.holderId);
    await taken.release();
    expect((await a.inspect('renewed'))?.held).toBe(false);
  });

  it('tells a holder whose entry was removed at its next renewal, and never takes the key back', async () => {
    const a = await v2();
    const handle = await a.acquire('removed', { ttlMs: 3_000, renew: true });
    await (await lines()).updateOne({ _id: 'removed' as never }, { $set: { line: [] } });
    // Within a renewal interval (1 s), well before the lease would have run out by itself.
    await eventually(() => handle.signal.aborted, 2_000);
    expect(handle.signal.reason).toBeInstanceOf(LockLostError);
    await expect(handle.release()).rejects.toBeInstanceOf(LockLostError);
    expect((await a.inspect('removed'))?.held).toBe(false);
  });

  it('takes several keys all or nothing, names the holder on a timeout and leaves no entry', async () => {
    const a = await v2();
    const b = await v2();
    const blocker = await b.acquire('m2');
    // Each key's join must be answered by the deadline (else the wait fails as unavailable): a's
    // pool connection is opened first, and the wait leaves room for two joins on a loaded machine.
    await a.inspect('m1');
    const error = await a
      .acquire(['m1', 'm2', 'm3'], { timeoutMs: 1_500 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as LockNotAcquiredError).keys).toEqual(['m1', 'm2', 'm3']);
    expect((error as LockNotAcquiredError).holderId).toBe(b.holderId);
    await eventually(async () => (await a.inspect('m1'))?.held === false);
    expect(await a.inspect('m3')).toBeNull();
    expect((await a.inspect('m2'))?.waiting).toBe(0);
    await blocker.release();
    const all = await a.acquire(['m3', 'm1', 'm2'], { timeoutMs: 2_000 });
    expect(all.keys).toEqual(['m1', 'm2', 'm3']);
    await all.release();
  });

  it('runs readers together, a writer alone, and a semaphore up to its permits', async () => {
    const a = await v2();
    const b = await v2();
    const r1 = await a.acquire('rw', { mode: 'shared' });
    const r2 = await b.acquire('rw', { mode: 'shared', timeoutMs: 0 });
    expect((await a.inspect('rw'))?.holders).toHaveLength(2);
    const writer = b.acquire('rw', { timeoutMs: 10_000 });
    await eventually(async () => (await a.inspect('rw'))?.waiting === 1);
    await r1.release();
    await sleep(200);
    expect((await a.inspect('rw'))?.holders).toHaveLength(1);
    await r2.release();
    await (await writer).release();

    const p1 = await a.acquire('sem', { permits: 2 });
    const p2 = await b.acquire('sem', { permits: 2, timeoutMs: 0 });
    await expect(a.tryAcquire('sem', { permits: 2 })).resolves.toBeNull();
    await expect(a.acquire('sem', { permits: 3 })).rejects.toThrow(/semaphore of 2 permits/);
    await expect(a.acquire('sem')).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await Promise.all([p1.release(), p2.release()]);
  });

  it('answers the operator commands and events$ from the lines', async () => {
    const a = await v2();
    const b = await v2();
    const events = firstValueFrom(
      a.events$.pipe(
        filter((event) => event.key.startsWith('op:')),
        take(2),
        toArray(),
      ),
    );
    await sleep(300);
    const scoped = await b.acquire('op:1', { scope: 'job:7', ttlMs: 3_000, renew: true });
    const local = await a.acquire('op:2');
    expect((await a.list({ prefix: 'op:' })).map((state) => state.key)).toEqual(['op:1', 'op:2']);
    expect(await events).toMatchObject([
      { type: 'acquired', key: 'op:1', holderId: b.holderId, fence: scoped.fence },
      { type: 'acquired', key: 'op:2', holderId: a.holderId, fence: local.fence },
    ]);

    // Elsewhere: told at the next renewal. Here: told at once.
    await expect(a.releaseScope('job:7')).resolves.toBe(1);
    await eventually(() => scoped.signal.aborted, 2_000);
    const released = await a.forceRelease('op:2');
    expect(released).toMatchObject([{ holderId: a.holderId, fence: local.fence }]);
    expect(local.signal.reason).toBeInstanceOf(LockLostError);
    expect((await b.inspect('op:2'))?.held).toBe(false);
  });

  it('waitForRelease emits when the holder releases, or when its lease runs out', async () => {
    const a = await v2();
    const b = await v2({ safetyPollIntervalMs: 600_000 });
    const held = await a.acquire('watched');
    let freed = false;
    const released = firstValueFrom(b.waitForRelease('watched')).then(() => (freed = true));
    // Long enough for its stream to open and its first look to find the key held.
    await sleep(1_500);
    expect(freed).toBe(false);
    await held.release();
    // Heard on the release: without it, the next look is at the lease's end (30 s) or the
    // safety poll (10 min).
    await expect(Promise.race([released, sleep(5_000).then(() => 'not heard')])).resolves.toBe(
      true,
    );

    await a.acquire('expiring', { ttlMs: 1_000, renew: false });
    const started = performance.now();
    await firstValueFrom(b.waitForRelease('expiring'));
    expect(performance.now() - started).toBeGreaterThan(700);
    expect((await b.inspect('expiring'))?.held).toBe(false);
  });

  it('a try whose reply is late fails within its bound, and its join is left', async () => {
    await behindReplyDelay(async (proxy, slow) => {
      const observer = await v2();
      // The join lands at once; its reply comes 2.5 s later, past the try's 1 s.
      const replyHeld = proxy.holdNextReply('findAndModify', 2_500);
      const started = performance.now();
      const trying = slow.tryAcquire('late-try').catch((error: unknown) => error);
      await replyHeld;
      expect((await observer.inspect('late-try'))?.held).toBe(true);
      expect(await trying).toBeInstanceOf(LockStoreUnavailableError);
      expect(performance.now() - started).toBeLessThan(1_000 + LOAD_SLACK_MS);
      // The late win is nobody's: left once its reply (or a retry) comes back.
      await eventually(async () => (await observer.inspect('late-try'))?.held === false, 10_000);
    });
  });

  it('a wait whose join MongoDB does not answer by the deadline fails as unavailable, not held', async () => {
    await behindReplyDelay(async (proxy, slow) => {
      const replyHeld = proxy.holdNextReply('findAndModify', 2_500);
      const waiting = slow.acquire('unanswered', { timeoutMs: 1_000 }).catch((e: unknown) => e);
      await replyHeld;
      const error = await waiting;
      expect(error).toBeInstanceOf(LockStoreUnavailableError);
      expect((error as Error).message).toMatch(/did not answer the acquisition of "unanswered"/);
    });
  });

  it('polls without change streams, and still serves a waiter', async () => {
    const a = await v2({ changeStreams: 'off' });
    const b = await v2({ changeStreams: 'off', pollIntervalMs: 20, maxPollIntervalMs: 100 });
    const held = await a.acquire('polled');
    const next = b.acquire('polled', { timeoutMs: 10_000 });
    await sleep(300);
    await held.release();
    await (await next).release();
    expect(b.diagnostics.streamOpen).toBe(false);
  });

  it('keeps a polling waiter in its place by renewing its entry, however often it polls', async () => {
    const a = await v2();
    const b = await v2({ changeStreams: 'off', pollIntervalMs: 20, maxPollIntervalMs: 100 });
    const held = await a.acquire('kept', { ttlMs: 10_000 });
    const next = b.acquire('kept', { ttlMs: 1_000, timeoutMs: 10_000 });
    const entriesOfB = async () => {
      const doc = await (await lines()).findOne({ _id: 'kept' as never });
      return ((doc?.line ?? []) as { h: string; f: unknown }[])
        .filter((entry) => entry.h === b.holderId)
        .map((entry) => String(entry.f));
    };
    await eventually(async () => (await entriesOfB()).length === 1);
    const [joinedWith] = await entriesOfB();
    // Three of its leases: polls alone would have let its entry run out and join again.
    await sleep(3_000);
    expect(await entriesOfB()).toEqual([joinedWith]);
    await held.release();
    // Its entry's first fence: the number it joined with, times FENCES_PER_ENTRY.
    expect(String((await next).fence / FENCES_PER_ENTRY)).toBe(joinedWith);
  });

  it("serves one process's callers in the order they called, whatever order their joins travel in", async () => {
    const holder = await v2();
    // Each caller its own entry (no hand-over here): the joins' order is what is tested.
    const callers = await proxies.service({ engine: 'v2', localHandOff: false });
    const first = await holder.acquire('ordered');
    // Every command of `callers` takes 0-60 ms: joins sent together would land in any order.
    proxies.proxy.setMode({ latency: { baseMs: 0, jitterMs: 60 } });
    const served: number[] = [];
    const calls = Array.from({ length: 6 }, (_, i) =>
      callers.withLock('ordered', () => void served.push(i), { timeoutMs: 20_000 }),
    );
    await eventually(async () => (await holder.inspect('ordered'))?.waiting === 6, 10_000);
    await first.release();
    await Promise.all(calls);
    proxies.proxy.setMode(passThrough);
    expect(served).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('a caller that gives up while its join waits behind an earlier one sends no join', async () => {
    const holder = await v2();
    const callers = await proxies.service({ engine: 'v2', localHandOff: false });
    const first = await holder.acquire('queued');
    proxies.proxy.setMode({ latency: { baseMs: 300, jitterMs: 0 } });
    const patient = callers.acquire('queued', { timeoutMs: 20_000 });
    const impatient = callers.acquire('queued', { timeoutMs: 50 });
    // Busy behind the patient caller, or (its join unanswered past the reply margin, 300 ms a
    // command) blaming MongoDB: either way it sends nothing.
    const gaveUp = await impatient.catch((error: unknown) => error);
    expect([LockNotAcquiredError, LockStoreUnavailableError]).toContain(
      (gaveUp as Error).constructor,
    );
    await sleep(1_500);
    proxies.proxy.setMode(passThrough);
    // Only the patient caller is in line: a late join would wait there until its lease ended.
    expect((await holder.inspect('queued'))?.waiting).toBe(1);
    await first.release();
    await (await patient).release();
    expect((await holder.inspect('queued'))?.held).toBe(false);
  });

  it('elects one leader at a time, the next after a resignation with a larger fence', async () => {
    const a = await v2();
    const b = await v2();
    const first = await a.leadership('jobs', { ttlMs: 20_000 }).campaign();
    const second = b.leadership('jobs', { ttlMs: 20_000 }).campaign();
    // In line behind the leader: only news of the resignation can make it leader now.
    await eventually(async () => (await a.inspect(`${LEADER_KEY_PREFIX}jobs`))?.waiting === 1);
    expect(b.leadership('jobs').isLeader).toBe(false);
    const resignedAt = performance.now();
    await first.resign();
    const term = await second;
    // Not woken, it looks again at its renewal (a third of its 20 s lease).
    expect(performance.now() - resignedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    expect(term.fence).toBeGreaterThan(first.fence);
    expect(first.signal.aborted).toBe(true);
  });
});

describeWithFailPoints('LockService on engine v2, under fail points', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('a wait that gives up leaves again once a join of it lands after its leave', async () => {
    const client = await appClient('late-join-v2', { monitorCommands: true });
    const locks = await kit.service({ client, operationTimeoutMs: 500 });
    const other = await kit.service();
    const held = await other.acquire('late:k', { ttlMs: 20_000 });
    // The first join reaches MongoDB 2 s late; the call retries it at once (same token), waits
    // behind the holder, gives up at 1.2 s and leaves: the late join then makes the entry again.
    const blockTimeMS = 2_000;
    const fired = await failPoint(
      { times: 1 },
      {
        failCommands: ['findAndModify'],
        appName: 'late-join-v2',
        blockConnection: true,
        blockTimeMS,
      },
    );
    let lateJoinSentAt = Infinity;
    const lateJoinAnswered = answerTo(client, (event) => {
      if (lateJoinSentAt !== Infinity || event.commandName !== 'findAndModify') return false;
      lateJoinSentAt = performance.now();
      return true;
    });
    const outcome = locks
      .acquire('late:k', { timeoutMs: 1_200, ttlMs: 20_000 })
      .catch((error: unknown) => error);
    // In line by its retried join, then out of it by its leave...
    await eventually(async () => (await other.inspect('late:k'))?.waiting === 1);
    expect(await outcome).toBeInstanceOf(LockNotAcquiredError);
    await eventually(async () => (await other.inspect('late:k'))?.waiting === 0);
    // ...before the first join could run (it runs 2 s after it was sent): it lands after the leave.
    expect(performance.now()).toBeLessThan(lateJoinSentAt + blockTimeMS);
    await lateJoinAnswered;
    expect(await failPoint('off')).toBe(fired + 1);
    await held.release();
    // Left again, not held by nobody for the late entry's 20 s lease.
    await eventually(async () => {
      const probe = await other.tryAcquire('late:k');
      await probe?.release();
      return probe !== null;
    }, 3_000);
  });

  it('reads its stream open again once it reopens, with no change in between, and still wakes a waiter', async () => {
    const client = await appClient('reopen-v2');
    const locks = await kit.service({ client });
    const other = await kit.service();
    await eventually(() => locks.diagnostics.streamOpen);
    // One getMore fails with an error the driver does not resume from: the service reopens.
    await failPoint(
      { times: 1 },
      { failCommands: ['getMore'], appName: 'reopen-v2', errorCode: 89, errorLabels: [] },
    );
    await eventually(() => !locks.diagnostics.streamOpen, 5_000);
    // Nothing was written meanwhile: the reopened stream itself says it is open.
    await eventually(() => locks.diagnostics.streamOpen, 5_000);
    const held = await other.acquire('reopened:k', { ttlMs: 20_000 });
    const waiting = locks.acquire('reopened:k', { timeoutMs: 10_000 });
    await eventually(() => locks.diagnostics.waiters === 1);
    const releasedAt = performance.now();
    await held.release();
    const handle = await waiting;
    // Woken by the reopened stream, not by its entry's renewal timer (a third of 30 s).
    expect(performance.now() - releasedAt).toBeLessThan(2_000 + LOAD_SLACK_MS);
    await handle.release();
  });
});
