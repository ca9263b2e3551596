// After the start, a command cut by `operationTimeoutMs` names why MongoDB does not answer, as
// the start does (so does a try cut by its own bound): the driver's server monitor's last
// failure since its last success, in its message and as cause. A proxy between service and
// server: stopped, its port refuses connections; in a black hole nothing is answered, and
// nothing fails for a while.
import { once } from 'node:events';
import { MongoClient } from 'mongodb';
import type { ServerHeartbeatFailedEvent } from 'mongodb';
import { LockStoreUnavailableError } from '../../lib/errors';
import { LockService } from '../../lib/lock.service';
import { FaultProxy, passThrough, proxiedUri, proxyTarget } from '../support/fault-proxy';
import { settleWithin } from './adversarial/kit';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

describe('a command MongoDB leaves unanswered past operationTimeoutMs', () => {
  const kit = LockTestKit.forSuite();
  let proxy: FaultProxy;
  let client: MongoClient;
  let locks: LockService;
  /** What the client's server monitor saw fail, in order. */
  let failures: Error[];

  beforeEach(async () => {
    proxy = new FaultProxy(proxyTarget(kit.mongo.uri));
    // The monitor checks every 500 ms (the driver's least) rather than 10 s: a recovery is seen soon.
    client = new MongoClient(proxiedUri(kit.mongo.uri, await proxy.start()), {
      heartbeatFrequencyMS: 500,
    });
    await client.connect();
    failures = [];
    client.on('serverHeartbeatFailed', (event: ServerHeartbeatFailedEvent) =>
      failures.push(event.failure),
    );
    locks = new LockService(kit.options({ client, operationTimeoutMs: 1_000 }));
    await locks.start();
  });

  afterEach(async () => {
    proxy.setMode(passThrough);
    await settleWithin(locks.close(), 5_000);
    await proxy.stop();
    await settleWithin(client.close(), 5_000);
  });

  async function unanswered(call: Promise<unknown>): Promise<LockStoreUnavailableError> {
    const error = await call.then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(LockStoreUnavailableError);
    return error as LockStoreUnavailableError;
  }

  it("names the server monitor's last failure, in its message and as cause", async () => {
    // Its commands' bound (3 s) is past a try's own wait for a reply (1 s), which cuts the try.
    const tries = new LockService(kit.options({ client, operationTimeoutMs: 3_000 }));
    await tries.start();
    const failed = once(client, 'serverHeartbeatFailed');
    await proxy.stop(); // connections dropped, the port refuses new ones
    await failed;
    const error = await unanswered(locks.inspect('unanswered'));
    expect(error.message).toMatch(
      /^MongoDB did not answer inspect within 1000 ms; its outcome is unknown; the server monitor's last check failed: /,
    );
    expect(failures).toContain(error.cause);
    expect(error.message).toContain((error.cause as Error).message);
    // A wait names its last try's failure: a join cut so, which names the monitor's.
    const waited = await unanswered(locks.acquire('unanswered', { timeoutMs: 1_500 }));
    expect((waited.cause as Error).message).toMatch(/^MongoDB did not answer acquire within/);
    expect(failures).toContain((waited.cause as Error).cause);
    // A try cut by its own bound (a reply's margin from its start) names it too.
    const tried = await unanswered(tries.tryAcquire('unanswered'));
    expect(tried.message).toMatch(
      /^MongoDB did not answer the attempt on "unanswered" within 1000 ms; a late win is given back; the server monitor's last check failed: /,
    );
    expect(failures).toContain(tried.cause);
    await settleWithin(tries.close(), 5_000);
  });

  it('names no failure the monitor has seen a success since', async () => {
    const failed = once(client, 'serverHeartbeatFailed');
    proxy.setMode({ reset: { probability: 1 } }); // every reply cut: the monitor's check fails
    await failed;
    proxy.setMode(passThrough);
    await once(client, 'serverHeartbeatSucceeded');
    proxy.setMode({ blackHole: 'release' });
    const error = await unanswered(locks.inspect('unanswered'));
    expect(failures).not.toHaveLength(0);
    expect(error.message).toBe(
      'MongoDB did not answer inspect within 1000 ms; its outcome is unknown',
    );
    expect(error.cause).toBeUndefined();
  });

  it('keeps one set of listeners on a client many services share, none once they close', async () => {
    const others = Array.from({ length: 11 }, () => new LockService(kit.options({ client })));
    await Promise.all(others.map((service) => service.start()));
    expect(client.listenerCount('serverHeartbeatSucceeded')).toBe(1);
    await Promise.all(others.map((service) => service.close()));
    expect(client.listenerCount('serverHeartbeatSucceeded')).toBe(1);
    await locks.close();
    expect(client.listenerCount('serverHeartbeatSucceeded')).toBe(0);
  });
});
