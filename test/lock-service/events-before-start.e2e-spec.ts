import { firstValueFrom } from 'rxjs';
import { LockStoreUnavailableError, MongoLockError } from '../../lib/errors';
import type { LockEvent } from '../../lib/interfaces/lock-state.interface';
import { LockService } from '../../lib/lock.service';
import { FaultProxy, passThrough, proxiedUri, proxyTarget } from '../support/fault-proxy';
import { eventually, LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

// MongoDB away at boot: a proxy that forwards nothing stands between the service and the server.
describe('events$ and waitForRelease subscribed before the service could start', () => {
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

  it('does not error while MongoDB is away, then reports changes, and completes on close', async () => {
    const locks = new LockService(
      kit.options({ uri: proxiedUri(kit.mongo.uri, proxy.port), operationTimeoutMs: 300 }),
    );
    const seen: LockEvent[] = [];
    let failed: unknown;
    let completed = false;
    locks.events$.subscribe({
      next: (event) => seen.push(event),
      error: (error: unknown) => (failed = error),
      complete: () => (completed = true),
    });
    // Several starts fail meanwhile: each gives up after operationTimeoutMs.
    await sleep(1_500);
    proxy.setMode(passThrough);
    await eventually(() => locks.diagnostics.eventsFlowing, 10_000);
    const other = await kit.service({ holderId: 'other' });
    await other.withLock('after-boot', () => sleep(50));
    await eventually(() => seen.some((e) => e.key === 'after-boot' && e.type === 'acquired'));
    expect(failed).toBeUndefined();
    await locks.close();
    expect(completed).toBe(true);
  });

  it('stops trying to start once its only subscriber leaves', async () => {
    const locks = new LockService(
      kit.options({ uri: proxiedUri(kit.mongo.uri, proxy.port), operationTimeoutMs: 300 }),
    );
    const subscription = locks.events$.subscribe();
    await sleep(500);
    subscription.unsubscribe();
    // A start under way when it left may still end; none follows it.
    await sleep(1_000);
    const connections = proxy.counters.connections;
    await sleep(1_500);
    expect(proxy.counters.connections).toBe(connections);
    await locks.close();
  });

  // docs/waiting.md: `waitForRelease` has no deadline, and a look failing while MongoDB is
  // unavailable is made again; it used to fail at the first start that gave up.
  it('waitForRelease does not fail while MongoDB is away, and emits once the key is free', async () => {
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

describe('events$ and the start it makes', () => {
  const kit = LockTestKit.forSuite();

  it('errors with a start that would fail again: a holderId another service uses', async () => {
    const first = await kit.service({ holderId: 'events-twice' });
    const second = new LockService(kit.options({ holderId: 'events-twice' }));
    try {
      let failed: unknown;
      second.events$.subscribe({ error: (error: unknown) => (failed = error) });
      await eventually(() => failed !== undefined, 5_000);
      expect(failed).toBeInstanceOf(MongoLockError);
      expect(failed).not.toBeInstanceOf(LockStoreUnavailableError);
      expect((failed as Error).message).toMatch(/already used by another LockService/);
      // A leader watch, which listens to events$ too, goes on with its reads (and no crash),
      // and completes when the service closes.
      let watchCompleted = false;
      const watch = second
        .leadership('events-twice-job')
        .leader$.subscribe({ complete: () => (watchCompleted = true) });
      await sleep(500);
      expect(watch.closed).toBe(false);
      await second.close();
      await eventually(() => watchCompleted, 5_000);
    } finally {
      await second.close();
      await first.close();
    }
  });

  it('leaves no watch behind when its subscriber leaves as the start ends', async () => {
    const locks = new LockService(kit.options());
    try {
      const subscription = locks.events$.subscribe();
      await locks.start();
      subscription.unsubscribe();
      await sleep(300);
      expect(locks.diagnostics.eventsFlowing).toBe(false);
    } finally {
      await locks.close();
    }
  });
});
