// Options: an acquisition's `signal` "aborting it cancels the wait, and the call rejects with the
// signal's reason"; README: acquire$ "unsubscribing leaves nothing behind". A call made before
// `start()` (or with `enabled: false`) first starts the service, within its own time. While
// MongoDB was frozen, that start did not listen to the caller's signal: an aborted `acquire` (or
// an unsubscribed `acquire$`) went on until the start gave up (`operationTimeoutMs`, or the
// call's timeoutMs + 1 s), then rejected with LockStoreUnavailableError, not the abort's reason.
// A document lock's call, started the same way, did listen.
import { firstValueFrom } from 'rxjs';
import { LockService } from '../../lib/lock.service';
import { settleWithin, signalledMongo } from './adversarial/kit';

jest.setTimeout(60_000);

/** Far past the abort: waiting for the start to give up is the broken outcome. */
const operationTimeoutMs = 8_000;
const slackMs = 1_500;

const describeWithProcess = process.env.MONGODB_URI ? describe.skip : describe;

describeWithProcess('aborting a call that is starting the service, MongoDB frozen', () => {
  const mongo = signalledMongo();

  function service(): LockService {
    const locks = new LockService({
      uri: mongo.server.uri,
      dbName: 'abort-lazy-start',
      operationTimeoutMs,
      shutdownGraceMs: 0,
    });
    mongo.services.push(locks);
    return locks;
  }

  /** Starts `call` with MongoDB frozen, aborts it 200 ms in: it rejects with the reason at once. */
  async function abortedAtOnce(
    call: (locks: LockService, signal: AbortSignal) => Promise<unknown>,
  ) {
    const locks = service();
    mongo.server.signal('SIGSTOP');
    const aborting = new AbortController();
    const settled = settleWithin(call(locks, aborting.signal), 30_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const reason = new Error('the caller gave up');
    aborting.abort(reason);
    const outcome = await settled;
    expect(outcome).toMatchObject({ status: 'rejected', error: reason });
    expect(outcome.ms).toBeLessThan(200 + slackMs);
  }

  it('acquire rejects with the reason at once', () =>
    abortedAtOnce((locks, signal) => locks.acquire('lazy:a', { timeoutMs: 20_000, signal })));

  it('a document lock does the same (the control)', () =>
    abortedAtOnce((locks, signal) =>
      locks.documents('accounts').acquire('a1', { timeoutMs: 20_000, signal }),
    ));

  it('firstValueFrom(acquire$) with its signal aborted ends at once', () =>
    abortedAtOnce((locks, signal) =>
      firstValueFrom(locks.acquire$('lazy:b', { timeoutMs: 20_000, signal })),
    ));
});
