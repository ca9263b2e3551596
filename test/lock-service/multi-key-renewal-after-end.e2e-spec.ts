// A call of several keys renews the keys it took while it waits for a later one
// (`keepRenewed`, lib/earlier-holds.ts). A renewal that fails in passing (MongoDB slow, a
// refusal such as MaxTimeMSExpired) is tried again after a pause (`retriedUntil`: 50 ms,
// doubling). Stopped during that pause (the call aborted, or its service closed), the loop
// checks the stop only once the pause is over and after the next try fails: that try is still
// sent, after the call ended, its keys were given back, and even after `close()` resolved. No
// renewal of a call's keys may go out once the call has ended. Now `retriedUntil` checks the
// signal after its pause.
import { MongoServerError, type Document } from 'mongodb';
import { LEAVE_PIPELINE, RENEW_PIPELINE } from '../../lib/store/line/line-pipelines';
import { commandOf, interceptedClient } from '../support/intercepted-collection';
import { eventually, LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

describe('a call of several keys ended while a renewal of an earlier key waits to be tried again', () => {
  const kit = LockTestKit.forSuite();

  /** A service whose renewals of `key` fail in passing; `sent` says when each command went. */
  async function failingRenewals(key: string) {
    const sent: { what: 'renew' | 'leave'; at: number }[] = [];
    let failures = 0;
    const client = interceptedClient(await kit.client(), async (target, args) => {
      const filter = args[0] as Document;
      const { pipeline } = commandOf(args);
      if (filter._id === key && pipeline === RENEW_PIPELINE) {
        sent.push({ what: 'renew', at: performance.now() });
        failures += 1;
        throw new MongoServerError({ message: 'operation exceeded time limit', code: 262 });
      }
      if (filter._id === key && pipeline === LEAVE_PIPELINE) {
        sent.push({ what: 'leave', at: performance.now() });
      }
      return target.findOneAndUpdate(...args);
    });
    return { client, sent, failures: () => failures };
  }

  it('sends no renewal once the caller aborted it', async () => {
    const other = await kit.service();
    const b = await other.acquire('after:b', { ttlMs: 20_000 });
    const { client, sent, failures } = await failingRenewals('after:a');
    const w = await kit.service({ client });
    const controller = new AbortController();
    const call = w
      .acquire(['after:a', 'after:b'], {
        ttlMs: 6_000,
        timeoutMs: 20_000,
        signal: controller.signal,
      })
      .catch((error: unknown) => error);
    // The keep-alive's renewal of after:a (due 3 s in) failed four times: it now pauses 400 ms.
    await eventually(() => failures() === 4, 15_000);
    controller.abort(new Error('the caller left'));
    await call;
    const endedAt = performance.now();
    await sleep(1_500);
    await b.release();
    const late = sent.filter((command) => command.what === 'renew' && command.at > endedAt);
    // Given back, and nothing after.
    expect(sent.some((command) => command.what === 'leave')).toBe(true);
    // Broken: one renewal, sent at the end of the 400 ms pause.
    expect(late).toEqual([]);
  });

  it('sends no renewal once its service closed', async () => {
    const other = await kit.service();
    const b = await other.acquire('closed:b', { ttlMs: 20_000 });
    const { client, sent, failures } = await failingRenewals('closed:a');
    const w = await kit.service({ client });
    const call = w
      .acquire(['closed:a', 'closed:b'], { ttlMs: 6_000, timeoutMs: 20_000 })
      .catch((error: unknown) => error);
    await eventually(() => failures() === 4, 15_000);
    await w.close();
    await call;
    const closedAt = performance.now();
    await sleep(1_500);
    await b.release();
    const late = sent.filter((command) => command.what === 'renew' && command.at > closedAt);
    // Broken: one renewal, sent on the service's client after close() resolved.
    expect(late).toEqual([]);
  });
});
