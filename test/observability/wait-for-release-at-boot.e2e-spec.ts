// Promised (docs/waiting.md, "Waiting for a release"): `waitForRelease(key)` "has no deadline: it
// ends when the key is free, when you unsubscribe, or when the service closes"; "a look that fails
// because MongoDB is unavailable (unreachable, no primary during an election, no answer within
// `operationTimeoutMs`) is made again" on the poll's backoff. `events$`, which shares its stream,
// rides through the same outage at boot (docs/observability.md: "an outage does not error
// `events$`").
//
// The case: subscribed to a service that has not started yet while MongoDB is away. The wait
// tries the start again as `events$` does (`ServiceRuntime.waitForRelease`); it used to fail after
// one `operationTimeoutMs` with `LockStoreUnavailableError` ("LockService could not start").
import { firstValueFrom } from 'rxjs';
import { LockService } from '../../lib/lock.service';
import { FaultProxy, passThrough, proxiedUri, proxyTarget } from '../support/fault-proxy';
import { eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(30_000);

describe('waitForRelease subscribed while MongoDB is away at boot', () => {
  const kit = LockTestKit.forSuite();
  let proxy: FaultProxy;

  beforeEach(async () => {
    proxy = new FaultProxy(proxyTarget(kit.mongo.uri));
    await proxy.start();
    proxy.setMode({ blackHole: 'drop' });
  });

  afterEach(async () => {
    await proxy.stop();
  });

  it('does not fail while MongoDB is away, and emits once the key is free', async () => {
    const locks = new LockService(
      kit.options({ uri: proxiedUri(kit.mongo.uri, proxy.port), operationTimeoutMs: 300 }),
    );
    let outcome: string | undefined;
    const waiting = firstValueFrom(locks.waitForRelease('boot:free-key')).then(
      () => (outcome = 'free'),
      (error: unknown) => (outcome = `${(error as Error).name}: ${(error as Error).message}`),
    );
    // Several starts fail meanwhile: each gives up after operationTimeoutMs.
    await sleep(1_500);
    expect(outcome).toBeUndefined();
    proxy.setMode(passThrough);
    // The key has no document: free as soon as the service can look.
    await eventually(() => outcome !== undefined, 10_000);
    await waiting;
    expect(outcome).toBe('free');
    await locks.close();
  });
});
