// What a caller sees when MongoDB misbehaves: replies delayed, lost or failing after the
// write, connections reset, the server gone, the change stream down, and the app shutting
// down with locked work in flight. Faults come from the server's `failCommand` fail point
// (scoped to one service by its client's `appName`), from a stopped server, and, where a
// reply must arrive after the write it answers, from a small TCP proxy that holds it back.
import { Controller, HttpCode, Injectable, Post } from '@nestjs/common';
import {
  MongoClient,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  MongoWriteConcernError,
} from 'mongodb';
import type { CommandStartedEvent, Document } from 'mongodb';
import request from 'supertest';
import { LockHandleParam, Locked } from '../../lib';
import {
  InvalidLockOptionsError,
  LockLostError,
  LockServiceClosedError,
  LockStoreUnavailableError,
  MongoLockError,
} from '../../lib/errors';
import type { LockEvent } from '../../lib/interfaces';
import type { LockHandle } from '../../lib/lock-handle';
import { LockService } from '../../lib/lock.service';
import { startOfflineMongo } from '@nestjs-mongo-lock/mongo-offline';
import { lockModule, startAppContext, startHttpApp } from '../nest/support/nest-apps';
import { ReplyDelayProxy } from '../support/reply-delay-proxy';
import {
  canTake,
  describeWithFailPoints,
  faultTools,
  settleWithin,
  writeConcernTimeout,
} from './adversarial/kit';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { eventually, LockTestKit, sleep } from './lock-test-kit';
import { closedPort } from '../support/closed-port';

jest.setTimeout(30_000);

describeWithFailPoints('LockService under faults', () => {
  const kit = LockTestKit.forSuite();
  // Fail points, app-named clients (the `os` adapter lets Jest's VM send `appName`), raw locks.
  const { failPoint, failPointFired, appClient, rawLock, closeAfterTest } = faultTools(kit);

  const blockFindAndModify = (appName: string, blockTimeMS: number) => ({
    failCommands: ['findAndModify'],
    appName,
    blockConnection: true,
    blockTimeMS,
  });

  describe('double grant', () => {
    it('releaseAllHeld() while an acquisition is on its way does not free the key it then gets', async () => {
      const client = await appClient('grant-a');
      const a = await kit.service({ client });
      const b = await kit.service();
      const earlier = await a.acquire('grant:earlier', { ttlMs: 10_000 });
      // The acquisition's command and whatever releaseAllHeld() sends next wait 500 ms each,
      // in the order they were sent.
      await failPoint(
        { times: 2 },
        {
          failCommands: ['findAndModify', 'update'],
          appName: 'grant-a',
          blockConnection: true,
          blockTimeMS: 500,
        },
      );
      const acquiring = a.acquire('grant:k', { ttlMs: 10_000, timeoutMs: 5_000 });
      await sleep(100);
      const released = await a.releaseAllHeld();
      const handle = await acquiring;

      expect(handle.lost).toBe(false);
      expect(await canTake(b, 'grant:k')).toBe(false);
      // a's entry alone is in the line, and it is the handle's.
      expect((await rawLock('grant:k'))?.line).toEqual([
        expect.objectContaining({ h: a.holderId }),
      ]);
      expect(await b.inspect('grant:k')).toMatchObject({ held: true, fence: handle.fence });
      expect(released).toBe(1);
      expect(earlier.lost).toBe(true);
      expect(await canTake(b, 'grant:earlier')).toBe(true);
      await handle.release();
    });
  });

  describe('deadlines', () => {
    it('acquire against a blocked connection settles within timeoutMs + operationTimeoutMs', async () => {
      const client = await appClient('slow-a');
      const locks = await kit.service({ client, operationTimeoutMs: 500 });
      // Each blocked write answers after 5 s: a call that waits for one is over the bound below.
      await failPoint({ times: 4 }, blockFindAndModify('slow-a', 5_000));

      const acquiring = await settleWithin(
        locks.acquire('slow:k', { timeoutMs: 1_000, ttlMs: 5_000 }),
        6_000,
      );
      expect(acquiring.status).toBe('rejected');
      expect(acquiring.error).toBeInstanceOf(LockStoreUnavailableError);
      expect(acquiring.ms).toBeLessThan(1_000 + 500 + LOAD_SLACK_MS);
    });

    it('with MongoDB unreachable, every call settles within its bound with LockStoreUnavailableError', async () => {
      const mongo = await startOfflineMongo();
      const client = new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 30_000 });
      closeAfterTest(client);
      await client.connect();
      const locks = await kit.service({ client, operationTimeoutMs: 500 });
      const held = await locks.acquire('gone:held', { ttlMs: 1_000 });
      await mongo.stop();

      const [tried, acquired, inspected] = await Promise.all([
        settleWithin(locks.tryAcquire('gone:a'), 5_000),
        settleWithin(locks.acquire('gone:b', { timeoutMs: 1_000 }), 5_000),
        settleWithin(locks.inspect('gone:c'), 5_000),
      ]);
      // Unbounded, each would wait for server selection (30 s): still pending at 5 s.
      for (const [settled, boundMs] of [
        [tried, 500],
        [acquired, 1_000 + 500],
        [inspected, 500],
      ] as const) {
        expect(settled.status).toBe('rejected');
        expect(settled.error).toBeInstanceOf(LockStoreUnavailableError);
        expect(settled.ms).toBeLessThan(boundMs + LOAD_SLACK_MS);
      }

      // The handle's lease ran out meanwhile; its loss needs no answer from MongoDB.
      await eventually(() => held.lost, 5_000);
      // Asking MongoDB would wait for server selection (30 s): pending at the 5 s limit.
      const releasing = await settleWithin(held.release(), 5_000);
      expect(releasing.status).toBe('rejected');
      expect(releasing.error).toBeInstanceOf(LockLostError);
      expect(releasing.ms).toBeLessThan(LOAD_SLACK_MS);
      const closing = await settleWithin(locks.close(), 5_000);
      expect(closing.status).toBe('resolved');
      expect(closing.ms).toBeLessThan(1_000 + LOAD_SLACK_MS);

      // A driver error that arrives first is the cause.
      const port = await closedPort();
      const refused = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, {
        serverSelectionTimeoutMS: 200,
      });
      closeAfterTest(refused);
      const unreachable = await kit.service({
        client: refused,
        ensureIndexes: false,
        operationTimeoutMs: 2_000,
      });
      const failed = await settleWithin(unreachable.tryAcquire('gone:d'), 3_000);
      expect(failed.status).toBe('rejected');
      expect(failed.error).toBeInstanceOf(LockStoreUnavailableError);
      // The service's change stream, opened at start, is the client's first command: its server
      // selection fails first, and the driver then closes a client that never connected.
      const cause = (failed.error as Error).cause;
      expect(
        cause instanceof MongoServerSelectionError || cause instanceof MongoTopologyClosedError,
      ).toBe(true);
    });
  });

  describe('unknown outcomes', () => {
    it('a win whose reply came after the caller gave up, or with a write concern error, is given back', async () => {
      const client = await appClient('late-win');
      const locks = await kit.service({ client, operationTimeoutMs: 400 });
      const other = await kit.service();

      // The write lands 2.5 s after the call, long after the call gave up (a call that waited
      // for its reply would take 2.5 s, over the bound below).
      await failPoint({ times: 1 }, blockFindAndModify('late-win', 2_500));
      const late = await settleWithin(locks.tryAcquire('unknown:late', { ttlMs: 10_000 }), 4_000);
      expect(late.status).toBe('rejected');
      expect(late.error).toBeInstanceOf(LockStoreUnavailableError);
      expect(late.ms).toBeLessThan(400 + LOAD_SLACK_MS);
      await sleep(Math.max(0, 2_700 - late.ms)); // the write has landed
      await eventually(() => canTake(other, 'unknown:late'), 5_000); // not given back: 10 s

      // The write is applied, its reply says the majority did not confirm it in time.
      await failPoint({ times: 1 }, writeConcernTimeout('late-win'));
      const unconfirmed = await settleWithin(
        locks.tryAcquire('unknown:wce', { ttlMs: 10_000 }),
        3_000,
      );
      expect(unconfirmed.status).toBe('rejected');
      await eventually(() => canTake(other, 'unknown:wce'), 5_000); // not given back: 10 s
      expect(unconfirmed.error).toBeInstanceOf(LockStoreUnavailableError);
      expect((unconfirmed.error as Error).cause).toBeInstanceOf(MongoWriteConcernError);
    });

    it('a retry recognises the win of an earlier attempt whose reply was lost', async () => {
      // The client gives up on a reply after 300 ms and never retries by itself; the
      // library's next attempt comes 500-1000 ms later, after the first write landed.
      const client = await appClient('lost-reply', { socketTimeoutMS: 300, retryWrites: false });
      const locks = await kit.service({ client, pollIntervalMs: 1_000, maxPollIntervalMs: 1_000 });
      const before = await failPoint({ times: 1 }, blockFindAndModify('lost-reply', 600));

      const acquired = await settleWithin(
        locks.acquire('unknown:retry', { ttlMs: 10_000, timeoutMs: 2_500 }),
        4_000,
      );
      expect(acquired.status).toBe('resolved');
      const handle = acquired.value!;
      // One entry in the line, the first attempt's, found again by its token: not a second one
      // behind it (which would wait for the first's lease).
      const doc = await rawLock('unknown:retry');
      expect(doc?.line).toEqual([expect.objectContaining({ h: locks.holderId })]);
      expect(await locks.inspect('unknown:retry')).toMatchObject({
        held: true,
        fence: handle.fence,
      });
      await handle.release();
      // On a loaded machine the retry may go ahead of the first write, which then lands after
      // the release: left again by the library once it has (well within the 10 s lease).
      await eventually(async () => {
        const line = (await rawLock('unknown:retry'))?.line;
        return Array.isArray(line) && line.length === 0;
      }, 3_000);
      expect(await failPoint('off')).toBe(before + 1); // the first attempt's reply was held back
    });

    // No past owners are kept (docs/engine-v2.md, "Behaviour to know"): the retry finds the
    // entry gone, and says so.
    it('a release that met a write concern error after the write frees the key; its retry reports LockLostError', async () => {
      const client = await appClient('wce-release');
      const locks = await kit.service({ client });
      const other = await kit.service();
      const handle = await locks.acquire('unknown:release', { ttlMs: 5_000 });
      await failPoint({ times: 1 }, writeConcernTimeout('wce-release'));

      const first = await settleWithin(handle.release(), 3_000);
      expect(first.status).toBe('rejected');
      expect(first.error).toBeInstanceOf(LockStoreUnavailableError);
      expect((first.error as Error).cause).toBeInstanceOf(MongoWriteConcernError);
      // The write landed: the key is free.
      expect(await canTake(other, 'unknown:release')).toBe(true);

      // The release retried in the background finds the entry gone.
      await eventually(() => handle.released);
      await expect(handle.release()).rejects.toBeInstanceOf(LockLostError);
      expect(handle.lost).toBe(true);
    });
  });

  describe('change stream', () => {
    it('start() settles within operationTimeoutMs when its indexes and its change stream are each slow', async () => {
      const client = await appClient('slow-start');
      await failPoint('alwaysOn', {
        failCommands: ['createIndexes', 'aggregate'],
        appName: 'slow-start',
        blockConnection: true,
        blockTimeMS: 3_500,
      });
      const locks = new LockService(kit.options({ client, operationTimeoutMs: 4_000 }));
      const startedAt = performance.now();
      const starting = await settleWithin(locks.start(), 15_000);
      const tookMs = performance.now() - startedAt;
      await failPoint('off');
      await locks.close();
      // Started, its waiters polling until the stream opens; within one operationTimeoutMs, not
      // one for the indexes and another for the stream (7 s).
      expect(starting.status).toBe('resolved');
      expect(tookMs).toBeLessThan(4_000 + LOAD_SLACK_MS);
    });

    it("a waiter whose change stream's read stalls is served soon after a release, not at its renewal", async () => {
      const client = await appClient('stalled-stream');
      const waiter = await kit.service({ client, operationTimeoutMs: 1_000 });
      const holder = await kit.service();
      const held = await holder.acquire('stalled:k', { ttlMs: 30_000 });
      // The waiter's next getMore gets no answer for a minute (a connection gone silent).
      const before = await failPoint(
        { times: 1 },
        {
          failCommands: ['getMore'],
          appName: 'stalled-stream',
          blockConnection: true,
          blockTimeMS: 60_000,
        },
      );
      // Its 60 s lease is renewed 20 s into the wait; the stall counts as a failure 1 s + 5 s
      // (operationTimeoutMs, at least 5 s) after the read was sent, and waiters then poll.
      const waiting = waiter.acquire('stalled:k', { ttlMs: 60_000, timeoutMs: 14_000 });
      await failPointFired(before + 1);
      await eventually(async () => (await holder.inspect('stalled:k'))?.waiting === 1, 3_000);
      await held.release();
      const handle = await waiting;
      expect(handle.fence).toBeGreaterThan(held.fence);
      await handle.release();
    });
  });

  describe('silent loss', () => {
    it("when release() fails, the handle's signal still aborts at its lease end, before the server's", async () => {
      const client = await appClient('silent');
      const locks = await kit.service({ client });
      // A lease long enough for a safety margin (5 %) that a late timer on a loaded machine
      // stays within: the signal must abort between the local and the server's lease end.
      const handle = await locks.acquire('silent:k', { ttlMs: 6_000 });
      const serverEnd = ((await rawLock('silent:k'))?.line as { e: Date }[])[0].e.getTime();
      const localEnd = handle.expiresAt.getTime();
      const losses: LockLostError[] = [];
      handle.lost$.subscribe((error) => losses.push(error));
      let abortedAt: number | undefined;
      handle.signal.addEventListener('abort', () => (abortedAt = Date.now()));
      // The release, and its retries in the background, fail until the lease has ended.
      await failPoint('alwaysOn', {
        failCommands: ['findAndModify'],
        appName: 'silent',
        errorCode: 89,
        errorLabels: [],
      });

      const releasing = await settleWithin(handle.release(), 3_000);
      expect(releasing.status).toBe('rejected');
      expect(handle.released).toBe(false);
      expect(handle.signal.aborted).toBe(false);

      await eventually(() => abortedAt !== undefined, localEnd - Date.now() + 2_000);
      expect(handle.signal.reason).toBeInstanceOf(LockLostError);
      expect(losses).toHaveLength(1);
      expect(handle.lost).toBe(true);
      expect(releasing.error).toBeInstanceOf(LockStoreUnavailableError);
      // At the local deadline, which keeps a safety margin (5 % of 6 000 ms: 300 ms, less a few
      // ms of clock conversion) before the server's.
      expect(serverEnd - localEnd).toBeGreaterThanOrEqual(250);
      expect(abortedAt).toBeGreaterThanOrEqual(localEnd - 20);
      expect(abortedAt).toBeLessThan(serverEnd);
      await failPoint('off');
    });

    it('a release that meets a passing failure is retried in the background: the key is freed, and the handle no longer counts as held', async () => {
      const client = await appClient('release-blip');
      const locks = await kit.service({ client });
      const other = await kit.service();
      let waiting: Promise<LockHandle> | undefined;
      const result = await locks.withLock(
        'blip:k',
        async () => {
          waiting = other.acquire('blip:k', { timeoutMs: 10_000 });
          await eventually(async () => (await other.inspect('blip:k'))?.waiting === 1);
          // The release's write and the driver's one retry of it fail; MongoDB is fine after.
          await failPoint(
            { times: 2 },
            { failCommands: ['findAndModify'], appName: 'release-blip', errorCode: 10107 },
          );
          return 'result';
        },
        { ttlMs: 30_000 },
      );

      expect(result).toBe('result');
      // Shutdown would not wait for it: it holds nothing any more.
      expect(locks.diagnostics.held).toBe(0);
      // The waiter elsewhere is served long before the 30 s lease would have ended.
      const handle = await waiting!;
      expect(handle.fence).toBeGreaterThan(0n);
      await handle.release();
    });

    it('a lock whose release MongoDB did not confirm is not re-entered: a nested call on its key takes it anew', async () => {
      const client = await appClient('release-then-nest');
      const locks = await kit.service({ client });
      const other = await kit.service();
      await locks.withLock(
        'nest:k',
        async (outer) => {
          await failPoint(
            { times: 2 },
            { failCommands: ['findAndModify'], appName: 'release-then-nest', errorCode: 10107 },
          );
          await expect(outer.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);
          expect(LockService.current()).toBeUndefined();
          await locks.withLock(
            'nest:k',
            async (inner) => {
              // Its own entry, after the background leave: no other instance can have the key.
              expect(inner.fence).toBeGreaterThan(outer.fence);
              expect(await other.tryAcquire('nest:k')).toBeNull();
            },
            { timeoutMs: 10_000 },
          );
        },
        { ttlMs: 30_000 },
      );
    });
  });

  describe('lost wake-ups', () => {
    it('a waiter whose reply comes back after the release was streamed still wakes', async () => {
      const target = new URL(kit.mongo.uri);
      const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
      await proxy.start();
      try {
        const a = await kit.service();
        const b = await kit.service({
          uri: `mongodb://127.0.0.1:${proxy.port}/?directConnection=true`,
        });
        const otherHeld = await a.acquire('wake:other', { ttlMs: 10_000 });
        const held = await a.acquire('wake:k', { ttlMs: 10_000 });
        // b's change stream already runs, for a wait on another key.
        const otherWait = b.acquire('wake:other', { timeoutMs: 8_000 });
        await eventually(() => b.diagnostics.streamEstablished, 3_000);

        const replyHeld = proxy.holdNextReply('findAndModify', 700);
        const waiting = settleWithin(b.acquire('wake:k', { timeoutMs: 4_000 }), 5_000);
        expect((await settleWithin(replyHeld, 2_000)).status).toBe('resolved');
        await held.release(); // after b's attempt found the key held, before b hears so

        const result = await waiting;
        expect(result.status).toBe('resolved');
        // A missed wake-up waits for its entry's renewal (10 s): timeoutMs (4 s, rejected) first.
        expect(result.ms).toBeLessThan(700 + LOAD_SLACK_MS);
        await result.value!.release();
        await otherHeld.release();
        await (await otherWait).release();
      } finally {
        await kit.cleanup();
        await proxy.stop();
      }
    });

    it('a release during a change-stream outage still wakes the waiter, events$ subscribed meanwhile', async () => {
      const a = await kit.service();
      const client = await appClient('outage-b');
      const b = await kit.service({ client });
      const held = await a.acquire('outage:k', { ttlMs: 10_000 });
      await eventually(() => b.diagnostics.streamOpen, 3_000);
      await failPoint('alwaysOn', {
        failCommands: ['getMore'],
        appName: 'outage-b',
        errorCode: 89,
        errorLabels: [],
      });
      const waiting = settleWithin(b.acquire('outage:k', { timeoutMs: 8_000 }), 9_000);
      // The stream failed: the waiter now polls (at most 1 s apart) until it carries news again.
      await eventually(() => !b.diagnostics.streamOpen, 3_000);
      await failPoint('off');
      await held.release();
      const releasedAt = performance.now();
      const events: LockEvent[] = [];
      const subscription = b.events$.subscribe((event) => events.push(event));
      try {
        const result = await waiting;
        expect(result.status).toBe('resolved');
        // A poll (<= 1 s apart) or the reopened stream, then a renewal that confirms it holds.
        // A waiter left unwoken waits for its entry's renewal (10 s): timeoutMs (8 s) first.
        expect(performance.now() - releasedAt).toBeLessThan(2_000 + LOAD_SLACK_MS);
        await result.value!.release();
        await eventually(
          () => events.some((event) => event.type === 'released' && event.key === 'outage:k'),
          3_000,
        );
      } finally {
        subscription.unsubscribe();
      }
    });

    it('a waiter under connection resets gets the lock or a library error, never a raw driver error', async () => {
      const a = await kit.service();
      const client = await appClient('resets-b');
      const b = await kit.service({ client });
      const held = await a.acquire('resets:k', { ttlMs: 10_000 });
      // Every attempt (and the driver's own retry) hangs 250 ms, then its connection drops.
      await failPoint(
        { times: 50 },
        {
          failCommands: ['findAndModify'],
          appName: 'resets-b',
          closeConnection: true,
          blockConnection: true,
          blockTimeMS: 250,
        },
      );
      const failing = await settleWithin(b.acquire('resets:k', { timeoutMs: 1_000 }), 4_000);
      expect(failing.status).toBe('rejected');
      expect(failing.error).toBeInstanceOf(MongoLockError);
      expect(failing.error).toBeInstanceOf(LockStoreUnavailableError);

      // A few resets, then the key is free: the waiter gets it.
      const resetsBefore = await failPoint(
        { times: 3 },
        { failCommands: ['findAndModify'], appName: 'resets-b', closeConnection: true },
      );
      const waiting = settleWithin(b.acquire('resets:k', { timeoutMs: 3_000 }), 4_000);
      await sleep(100);
      await held.release();
      const result = await waiting;
      if (result.status === 'rejected') expect(result.error).toBeInstanceOf(MongoLockError);
      else expect(result.status).toBe('resolved');
      await result.value?.release();
      expect(await failPoint('off')).toBe(resetsBefore + 3); // all three resets happened
    });
  });

  describe('shutdown', () => {
    @Controller('drain')
    class DrainController {
      @Post(':id')
      @HttpCode(200)
      @Locked('drain:{params.id}', { timeoutMs: 0 })
      async run(@LockHandleParam() lock: LockHandle) {
        // Long enough that the test's look at the lock, after close() began, falls within it
        // on a loaded machine too.
        await sleep(2_000);
        return { aborted: lock.signal.aborted };
      }
    }

    @Injectable()
    class LongJob {
      abortedAt: number | undefined;

      @Locked('grace:job', { timeoutMs: 0 })
      async run(): Promise<boolean> {
        const signal = LockService.current()!.signal;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 10_000);
          signal.addEventListener('abort', () => {
            this.abortedAt = Date.now();
            clearTimeout(timer);
            resolve();
          });
        });
        return signal.aborted;
      }
    }

    it('app.close() lets a locked request finish under its lock, then the lock is free', async () => {
      const app = await startHttpApp(
        {
          imports: [lockModule(kit.mongo, { ...kit.options() })],
          controllers: [DrainController],
        },
        'express',
      );
      let closing: Promise<void> | undefined;
      try {
        const other = await kit.service();
        const responding = request(app.getHttpServer() as Parameters<typeof request>[0])
          .post('/drain/1')
          .then((response) => response);
        await eventually(async () => (await other.inspect('drain:1'))?.held === true, 2_000);
        closing = app.close();
        await sleep(150);
        expect(await canTake(other, 'drain:1')).toBe(false);

        const response = await responding;
        expect(response.status).toBe(200);
        expect(response.body).toEqual({ aborted: false });
        await closing;
        expect(await canTake(other, 'drain:1')).toBe(true);
      } finally {
        await (closing ?? app.close());
      }
    });

    it("past shutdownGraceMs, the holder's signal aborts first, then its lock is released", async () => {
      // Long enough that the look 200 ms into the grace period falls within it under load.
      const graceMs = 1_500;
      const context = await startAppContext({
        imports: [lockModule(kit.mongo, { ...kit.options(), shutdownGraceMs: graceMs })],
        providers: [LongJob],
      });
      let closing: Promise<void> | undefined;
      try {
        const other = await kit.service();
        const waiter = await kit.service();
        const job = context.get(LongJob);
        const running = job.run().catch((error: unknown) => error);
        await eventually(async () => (await other.inspect('grace:job'))?.held === true, 2_000);
        // Gets the key once the job's lock is released, and notes when.
        const next = waiter
          .acquire('grace:job', { timeoutMs: 10_000 })
          .then((handle) => ({ handle, at: Date.now() }));
        const closeStartedAt = Date.now();
        closing = context.close();
        await sleep(200);
        // Within the grace period: still held, still renewed, not told anything.
        expect(job.abortedAt).toBeUndefined();
        expect(await canTake(other, 'grace:job')).toBe(false);

        await closing;
        await running;
        expect(job.abortedAt).toBeDefined();
        expect(job.abortedAt! - closeStartedAt).toBeGreaterThanOrEqual(graceMs - 20);
        // Released after the signal aborted: the waiter got the key no earlier.
        const taken = await next;
        expect(taken.at).toBeGreaterThanOrEqual(job.abortedAt!);
        await taken.handle.release();
        expect(await canTake(other, 'grace:job')).toBe(true);
      } finally {
        await (closing ?? context.close());
      }
    });
  });

  describe('smaller defects', () => {
    it('close() during an attempt in flight leaves no lock held', async () => {
      // b creates (and so closes) its own client; it cannot carry an appName inside Jest (see
      // appClient), but b's attempt is the only findAndModify while the fail point is armed.
      const b = await kit.service({ operationTimeoutMs: 2_000 });
      const c = await kit.service();
      const blockTimeMS = 600;
      const fired = await failPoint(
        { times: 1 },
        { failCommands: ['findAndModify'], blockConnection: true, blockTimeMS },
      );
      const started = performance.now();
      const acquiring = b.acquire('close:k', { ttlMs: 10_000, timeoutMs: 5_000 }).then(
        () => 'acquired',
        (error: unknown) => error,
      );
      // b's join reached MongoDB and is held there: close() while it is in flight...
      await failPointFired(fired + 1);
      expect(performance.now() - started).toBeLessThan(blockTimeMS);
      await b.close();
      expect(await acquiring).toBeInstanceOf(LockServiceClosedError);
      // ...and it lands (it makes the key's document), then it is given back: not given back, the
      // key stays held for its 10 s lease.
      await eventually(async () => (await rawLock('close:k')) !== undefined, 5_000);
      await eventually(() => canTake(c, 'close:k'), 3_000);
    });

    it("lock writes carry the client's wtimeout, else operationTimeoutMs", async () => {
      const writeConcerns = (client: MongoClient) => {
        const seen: Document[] = [];
        client.on('commandStarted', (event: CommandStartedEvent) => {
          if (event.commandName === 'findAndModify') seen.push(event.command.writeConcern);
        });
        return seen;
      };
      const configured = await appClient('wt-a', {
        monitorCommands: true,
        writeConcern: { w: 1, wtimeoutMS: 1_234 },
      });
      const seenConfigured = writeConcerns(configured);
      const a = await kit.service({ client: configured });
      await (await a.acquire('wt:a')).release();
      expect(seenConfigured).toEqual([
        expect.objectContaining({ w: 'majority', wtimeout: 1_234 }),
        expect.objectContaining({ w: 'majority', wtimeout: 1_234 }),
      ]);

      const plain = await appClient('wt-b', { monitorCommands: true });
      const seenPlain = writeConcerns(plain);
      const b = await kit.service({ client: plain, operationTimeoutMs: 700 });
      await (await b.acquire('wt:b')).release();
      expect(seenPlain).toEqual([
        expect.objectContaining({ w: 'majority', wtimeout: 700 }),
        expect.objectContaining({ w: 'majority', wtimeout: 700 }),
      ]);
    });

    it('a second service with the same holderId is refused while the first is live', async () => {
      const first = await kit.service({ holderId: 'dup-holder' });
      for (let round = 0; round < 2; round += 1) {
        const refused = await kit.service({ holderId: 'dup-holder' }).catch((error) => error);
        expect(refused).toBeInstanceOf(InvalidLockOptionsError);
        expect(refused).toMatchObject({ option: 'holderId' });
      }
      await first.close();
      const next = await kit.service({ holderId: 'dup-holder' });
      expect(await canTake(next, 'dup:k')).toBe(true);
    });

    it('waitForRelease does not emit when our lost hold ends while another instance holds the key', async () => {
      const a = await kit.service();
      const b = await kit.service();
      const lostHandle = await a.acquire('wait:k', { ttlMs: 1_000 });
      const bHandle = await b.acquire('wait:k', { ttlMs: 10_000, timeoutMs: 3_000 });
      expect(lostHandle.lost).toBe(true);
      let emitted = false;
      const subscription = a.waitForRelease('wait:k').subscribe(() => (emitted = true));
      try {
        await sleep(150);
        await expect(lostHandle.release()).rejects.toBeInstanceOf(LockLostError);
        await sleep(400);
        expect(emitted).toBe(false);
        await bHandle.release();
        await eventually(() => emitted, 5_000);
      } finally {
        subscription.unsubscribe();
      }
    });

    it('waitForRelease sends no look after an unsubscribe during one', async () => {
      const holder = await kit.service();
      const held = await holder.acquire('look:k', { ttlMs: 30_000 });
      const client = await appClient('look-waiter', { monitorCommands: true });
      let looks = 0;
      client.on('commandStarted', (event: CommandStartedEvent) => {
        if (event.commandName === 'find') looks += 1;
      });
      // Safety looks every 100 ms: a wait that went on would look several times below.
      const waiter = await kit.service({ client, safetyPollIntervalMs: 100 });
      await failPoint(
        { times: 1 },
        { failCommands: ['find'], appName: 'look-waiter', blockConnection: true, blockTimeMS: 300 },
      );
      const subscription = waiter.waitForRelease('look:k').subscribe();
      await eventually(() => looks === 1, 3_000);
      subscription.unsubscribe();
      await sleep(800);
      expect(looks).toBe(1);
      await held.release();
    });

    it('waitForRelease rides through a step-down: a look MongoDB refuses is made again, and it emits once the key is free', async () => {
      const holder = await kit.service();
      const held = await holder.acquire('blip:k', { ttlMs: 30_000 });
      // A short heartbeat: after a "not primary" error the driver selects the server again soon.
      const client = await appClient('blip-waiter', {
        monitorCommands: true,
        heartbeatFrequencyMS: 500,
      });
      let looks = 0;
      client.on('commandStarted', (event: CommandStartedEvent) => {
        if (event.commandName === 'find') looks += 1;
      });
      // Safety looks every 100 ms: the next one meets the fail point.
      const waiter = await kit.service({ client, safetyPollIntervalMs: 100 });
      const outcome: { emitted: boolean; error?: unknown } = { emitted: false };
      const subscription = waiter.waitForRelease('blip:k').subscribe({
        next: () => (outcome.emitted = true),
        error: (error: unknown) => (outcome.error = error),
      });
      try {
        await eventually(() => looks >= 1, 3_000);
        // Twice: the driver's one retry of the read fails too, as during a step-down's election.
        const before = await failPoint(
          { times: 2 },
          { failCommands: ['find'], appName: 'blip-waiter', errorCode: 189 },
        );
        await failPointFired(before + 2);
        const failedAt = looks;
        // It looks again (the key is still held), rather than failing.
        await eventually(() => looks > failedAt || outcome.error !== undefined, 5_000);
        expect(outcome).toEqual({ emitted: false });
        await held.release();
        await eventually(() => outcome.emitted || outcome.error !== undefined, 5_000);
        expect(outcome).toEqual({ emitted: true });
      } finally {
        subscription.unsubscribe();
      }
    });

    // On v2 a released event carries no holder id or fence (docs/engine-v2.md): it must never
    // carry the next holder's, even when read late.
    it("a released event read late never carries the next holder's id or fence", async () => {
      const a = await kit.service();
      const c = await kit.service();
      const client = await appClient('events-b');
      const b = await kit.service({ client });
      const events: LockEvent[] = [];
      const subscription = b.events$.subscribe((event) => events.push(event));
      try {
        await eventually(() => b.diagnostics.streamEstablished, 3_000);
        // The next getMore runs 500 ms late: by then the next holder has the key, and the
        // document looked up for the release is already theirs.
        const before = await failPoint(
          { times: 1 },
          {
            failCommands: ['getMore'],
            appName: 'events-b',
            blockConnection: true,
            blockTimeMS: 500,
          },
        );
        await (await a.acquire('events:warm')).release();
        await eventually(() => events.some((event) => event.key === 'events:warm'), 2_000);
        const first = await a.acquire('events:k');
        await first.release();
        const next = await c.acquire('events:k');
        await eventually(
          () => events.some((event) => event.key === 'events:k' && event.type === 'released'),
          3_000,
        );
        const released = events.filter(
          (event) => event.key === 'events:k' && event.type === 'released',
        );
        expect(released).toHaveLength(1);
        expect(released[0].holderId).not.toBe(c.holderId);
        expect([a.holderId, null]).toContain(released[0].holderId);
        expect(released[0].fence).not.toBe(next.fence);
        expect([first.fence, null]).toContain(released[0].fence);
        // The next holder's acquisition is reported as its own.
        await eventually(
          () =>
            events.some(
              (event) =>
                event.key === 'events:k' &&
                event.type === 'acquired' &&
                event.holderId === c.holderId &&
                event.fence === next.fence,
            ),
          3_000,
        );
        await next.release();
        expect(await failPoint('off')).toBe(before + 1); // the getMore was late
      } finally {
        subscription.unsubscribe();
      }
    });

    it('releaseAllHeld() does not count a lease that had already expired', async () => {
      const locks = await kit.service();
      const other = await kit.service();
      await locks.acquire('count:short', { ttlMs: 1_000 });
      const long = await locks.acquire('count:long', { ttlMs: 10_000 });
      await sleep(1_100);
      expect(await locks.releaseAllHeld()).toBe(1);
      expect(long.lost).toBe(true);
      expect(await canTake(other, 'count:long')).toBe(true);
    });
  });
});
