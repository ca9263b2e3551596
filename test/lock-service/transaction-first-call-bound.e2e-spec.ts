// README, Outages: `withLock` and `@Locked` taking the lock settle within `timeoutMs` + 1 s (or
// + `operationTimeoutMs` if shorter) while MongoDB is away, a lazy start counting in that time,
// and an aborted `signal` or the service's close ends the wait. A `transaction: true` call first
// asks MongoDB whether it has transactions (`hello`, remembered once answered): that question was
// sent outside the acquisition, bounded only by `operationTimeoutMs` (after a lazy start of its
// own, also unbounded by the call), so while MongoDB is frozen the call took `operationTimeoutMs`
// (twice that before `start()`) whatever its `timeoutMs`, its signal or a close().
import { LockService } from '../../lib/lock.service';
import { LockServiceClosedError } from '../../lib/errors';
import { settleWithin, signalledMongo } from './adversarial/kit';

jest.setTimeout(60_000);

/** Long enough that waiting for it is far past the calls' bounds, whatever the load. */
const operationTimeoutMs = 8_000;
/** `timeoutMs: 0`: one attempt, settled within 1 s (README, Outages). */
const boundMs = 1_000;
/** A loaded 2-core machine; the broken outcome is 8 s (or 16 s), far past it. */
const slackMs = 1_500;

const describeWithProcess = process.env.MONGODB_URI ? describe.skip : describe;

describeWithProcess('withLock({ transaction: true }) while MongoDB is frozen', () => {
  const mongo = signalledMongo();

  function service(): LockService {
    const locks = new LockService({
      uri: mongo.server.uri,
      dbName: 'tx-first-call',
      operationTimeoutMs,
      shutdownGraceMs: 0,
    });
    mongo.services.push(locks);
    return locks;
  }

  const inTransaction = (locks: LockService, signal?: AbortSignal) =>
    locks.withLock('tx:first', async () => 'done', { transaction: true, timeoutMs: 0, signal });

  it('the first transactional call after start settles within timeoutMs + 1 s', async () => {
    const locks = service();
    await locks.start();
    mongo.server.signal('SIGSTOP');
    const outcome = await settleWithin(inTransaction(locks), 30_000);
    expect(outcome.status).toBe('rejected');
    expect(outcome.ms).toBeLessThan(boundMs + slackMs);
  });

  it('a transactional call that starts the service settles within timeoutMs + 1 s', async () => {
    const locks = service();
    mongo.server.signal('SIGSTOP');
    const outcome = await settleWithin(inTransaction(locks), 30_000);
    expect(outcome.status).toBe('rejected');
    expect(outcome.ms).toBeLessThan(boundMs + slackMs);
  });

  it("ends with the caller's signal and with close()", async () => {
    const locks = service();
    await locks.start();
    mongo.server.signal('SIGSTOP');
    const aborting = new AbortController();
    const aborted = settleWithin(inTransaction(locks, aborting.signal), 30_000);
    const closed = settleWithin(
      locks.withLock('tx:other', async () => 'done', { transaction: true, timeoutMs: 20_000 }),
      30_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    const reason = new Error('the caller gave up');
    aborting.abort(reason);
    const closing = settleWithin(locks.close(), 30_000);
    const [byAbort, byClose] = await Promise.all([aborted, closed]);
    expect(byAbort).toMatchObject({ status: 'rejected', error: reason });
    expect(byAbort.ms).toBeLessThan(200 + slackMs);
    expect(byClose).toMatchObject({
      status: 'rejected',
      error: expect.any(LockServiceClosedError),
    });
    expect(byClose.ms).toBeLessThan(200 + slackMs + 2_000);
    expect((await closing).status).toBe('resolved');
  });
});
