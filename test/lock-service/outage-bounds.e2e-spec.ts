// The README's Outages table, measured: every public call settles within its stated bound
// while MongoDB is frozen (SIGSTOP: connections stay open, nothing is answered) and while it
// is dead (SIGKILL: connections refused). The server runs in its own process so that it can
// be signalled; with MONGODB_URI (no process to signal) the suite is skipped.
import { MongoClient } from 'mongodb';
import { LockService } from '../../lib/lock.service';
import { LockServiceClosedError } from '../../lib/errors/lock-service-closed.error';
import type { MongoLockModuleOptions } from '../../lib/interfaces';
import { settleWithin, signalledMongo, type Settled } from './adversarial/kit';

jest.setTimeout(60_000);

const operationTimeoutMs = 2_000;
const timeoutMs = 1_000;
const shutdownGraceMs = 500;
/** The library's own margin over `timeoutMs` for an acquisition (README, Outages). */
const acquireOverrunMs = 1_000;
/** The margin over `operationTimeoutMs` for one-command calls (README, Outages). */
const commandMarginMs = 250;
/** The margin over `shutdownGraceMs` for `close()` (README, Outages). */
const closeMarginMs = 2_000;
/**
 * What a loaded 2-core machine adds to any of these (timers firing late, a busy event loop).
 * Less than the suite's `LOAD_SLACK_MS`: the broken outcomes are close to the bounds (tryAcquire
 * waiting `operationTimeoutMs`: 2 s against 1 s; a commit waiting for its release: 4 s against
 * 2.25 s), and each must still fail here; the bigger ones too (releaseScope and releaseAllHeld
 * retrying give-backs: 6 s and more; close() over a minute).
 */
const loadSlackMs = 700;

const describeWithProcess = process.env.MONGODB_URI ? describe.skip : describe;

interface Account {
  _id: string;
  balance: number;
  version: number;
}

describeWithProcess.each(['frozen', 'dead'] as const)(
  'every public call is bounded while MongoDB is %s',
  (state) => {
    const mongo = signalledMongo();

    const options = (extra: Partial<MongoLockModuleOptions> = {}): MongoLockModuleOptions => ({
      dbName: 'bounds',
      operationTimeoutMs,
      shutdownGraceMs,
      ...(extra.client ? {} : { uri: mongo.server.uri }),
      ...extra,
    });

    async function service(extra: Partial<MongoLockModuleOptions> = {}): Promise<LockService> {
      const locks = new LockService(options(extra));
      mongo.services.push(locks);
      await locks.start();
      return locks;
    }

    function breakServer(): void {
      mongo.server.signal(state === 'frozen' ? 'SIGSTOP' : 'SIGKILL');
    }

    /** Calls that did not settle within their bound, with how long they took. */
    const outOfBound = (measured: [string, number, Settled<unknown>][]) =>
      measured
        .filter(([, boundMs, settled]) => settled.ms > boundMs + loadSlackMs)
        .map(([what, boundMs, settled]) => `${what}: ${Math.round(settled.ms)} ms > ${boundMs} ms`);

    it('acquire and tryAcquire settle within timeoutMs + 1 s, the others within operationTimeoutMs', async () => {
      const locks = await service();
      const accounts = locks.documents<Account>('accounts', { version: { field: 'version' } });
      const seeding = new MongoClient(mongo.server.uri);
      mongo.clients.push(seeding);
      await seeding
        .db('bounds')
        .collection<Account>('accounts')
        .insertMany([
          { _id: 'a1', balance: 10, version: 1 },
          { _id: 'a2', balance: 10, version: 1 },
          { _id: 'a3', balance: 10, version: 1 },
        ]);
      const held = await locks.acquire('bound:held', { ttlMs: 30_000 });
      const extended = await locks.acquire('bound:extended', { ttlMs: 30_000 });
      const scoped = await locks.acquire('bound:scoped', { ttlMs: 30_000, scope: 'session:1' });
      const document = await accounts.acquire('a1', { ttlMs: 30_000 });
      const updated = await accounts.acquire('a3', { ttlMs: 30_000 });
      // A waiter is parked on a held key: its change stream is open when the server goes.
      const other = await service();
      await other.acquire('bound:other', { ttlMs: 30_000 });
      const waiting = settleWithin(other.acquire('bound:held', { timeoutMs }), 20_000);

      breakServer();
      const calls: [string, number, Promise<unknown>][] = [
        ['acquire', timeoutMs + acquireOverrunMs, locks.acquire('bound:new', { timeoutMs })],
        ['tryAcquire', acquireOverrunMs, locks.tryAcquire('bound:try')],
        ['release', operationTimeoutMs + commandMarginMs, held.release()],
        ['extend', operationTimeoutMs + commandMarginMs, extended.extend()],
        ['inspect', operationTimeoutMs + commandMarginMs, locks.inspect('bound:held')],
        ['releaseScope', operationTimeoutMs + commandMarginMs, locks.releaseScope('session:1')],
        ['releaseAllHeld', operationTimeoutMs + commandMarginMs, other.releaseAllHeld()],
        ['commit', operationTimeoutMs + commandMarginMs, document.commit({ $inc: { balance: 1 } })],
        ['update', operationTimeoutMs + commandMarginMs, updated.update({ $inc: { balance: 1 } })],
        [
          'updateIfCurrent',
          operationTimeoutMs + commandMarginMs,
          accounts.updateIfCurrent('a2', 1, { $inc: { balance: 1 } }),
        ],
      ];
      const settled = await Promise.all(
        calls.map(([, boundMs, call]) => settleWithin(call, boundMs + 10_000)),
      );
      expect(
        outOfBound([
          ...calls.map(([what, boundMs], i): [string, number, Settled<unknown>] => [
            what,
            boundMs,
            settled[i],
          ]),
          ['waiting acquire', timeoutMs + acquireOverrunMs, await waiting],
        ]),
      ).toEqual([]);
      // None of them can have succeeded against a server that does not answer.
      for (const [i, outcome] of settled.entries()) {
        expect({ what: calls[i][0], status: outcome.status }).toEqual({
          what: calls[i][0],
          status: 'rejected',
        });
      }
      expect(scoped.signal.aborted).toBe(true);
    });

    it('close() settles within shutdownGraceMs + 2 s, with a lock held, whoever created the client', async () => {
      const own = await service();
      const userClient = new MongoClient(mongo.server.uri);
      mongo.clients.push(userClient);
      await userClient.connect();
      const shared = await service({ client: userClient });
      const heldByOwn = await own.acquire('bound:own', { ttlMs: 30_000 });
      await shared.acquire('bound:shared', { ttlMs: 30_000 });
      // Locked work still running at shutdown, and a waiter.
      const running = own.withLock('bound:work', () => new Promise((r) => setTimeout(r, 20_000)));
      running.catch(() => undefined);
      const waiter = shared.acquire('bound:own', { timeoutMs: 30_000 }).catch((e: unknown) => e);

      breakServer();
      const [ownClose, sharedClose] = await Promise.all([
        settleWithin(own.close(), 20_000),
        settleWithin(shared.close(), 20_000),
      ]);
      expect(
        outOfBound([
          ['close, module client', shutdownGraceMs + closeMarginMs, ownClose],
          ['close, user client', shutdownGraceMs + closeMarginMs, sharedClose],
        ]),
      ).toEqual([]);
      expect(heldByOwn.signal.aborted).toBe(true);
      expect(await settleWithin(waiter, 1_000)).toMatchObject({ status: 'resolved' });
    });

    it.each(['module', 'user'] as const)(
      'close() while the service is still starting settles within shutdownGraceMs + 2 s (%s client)',
      async (whose) => {
        let client: MongoClient | undefined;
        if (whose === 'user') {
          client = new MongoClient(mongo.server.uri);
          mongo.clients.push(client);
          await client.connect();
        }
        breakServer();
        // The start alone could take operationTimeoutMs, longer than close()'s bound.
        const locks = new LockService(options({ operationTimeoutMs: 6_000, client }));
        mongo.services.push(locks);
        const starting = settleWithin(locks.acquire('bound:starting', { timeoutMs }), 20_000);
        await new Promise((resolve) => setTimeout(resolve, 100));
        const closed = await settleWithin(locks.close(), 20_000);
        expect(
          outOfBound([['close while starting', shutdownGraceMs + closeMarginMs, closed]]),
        ).toEqual([]);
        // The start stopped too: the call learns the service closed, within its own bound.
        const call = await starting;
        expect(call.ms).toBeLessThan(closed.ms + 100 + loadSlackMs);
        expect(call).toMatchObject({
          status: 'rejected',
          error: expect.any(LockServiceClosedError),
        });
        expect(outOfBound([['acquire while closing', timeoutMs + acquireOverrunMs, call]])).toEqual(
          [],
        );
      },
    );
  },
);
