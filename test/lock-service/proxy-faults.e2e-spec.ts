import { LockStoreUnavailableError } from '../../lib/errors';
import { FaultProxy, passThrough, proxiedUri, proxyTarget } from '../support/fault-proxy';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { eventually, LockTestKit } from './lock-test-kit';

// Jest's default 5 s is what several tests here take on a loaded machine (up to 5.1 s measured).
jest.setTimeout(30_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// Faults below the driver (a TCP proxy between the service and the server): replies that
// arrive after their command timed out, as failCommand cannot produce.
describe('LockService behind a faulty network', () => {
  const kit = LockTestKit.forSuite();
  let proxy: FaultProxy;

  beforeEach(async () => {
    proxy = new FaultProxy(proxyTarget(kit.mongo.uri));
    await proxy.start();
  });

  afterEach(async () => {
    await proxy.stop();
  });

  const throughProxy = (extra: Record<string, unknown> = {}) =>
    kit.service({ uri: proxiedUri(kit.mongo.uri, proxy.port), operationTimeoutMs: 500, ...extra });

  it('a late win of a timed-out attempt is never released under the retry that recognised it', async () => {
    const locks = await throughProxy();
    const observer = await kit.service();
    proxy.setMode({ blackHole: 'release' });
    const acquiring = locks.acquire('late-win', { ttlMs: 5_000, timeoutMs: 4_000 });
    await sleep(1_200); // the first attempt timed out; a retry is on its way or waiting
    proxy.setMode(passThrough); // held bytes arrive: the first attempt's win, then the retry
    const handle = await acquiring;
    await sleep(700); // any wrongful give-back would have landed by now
    const state = await observer.inspect('late-win');
    expect(state).toMatchObject({ held: true, holderId: locks.holderId, fence: handle.fence });
    expect(await observer.tryAcquire('late-win')).toBeNull();
    expect(handle.lost).toBe(false);
    await handle.release();
    expect((await observer.inspect('late-win'))?.held).toBe(false);
  });

  it('an acquisition that gives up during a black hole leaves no lock once replies arrive', async () => {
    const locks = await throughProxy();
    const observer = await kit.service();
    proxy.setMode({ blackHole: 'release' });
    const startedAt = performance.now();
    const outcome = await locks
      .acquire('black-hole', { ttlMs: 10_000, timeoutMs: 300 })
      .catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(LockStoreUnavailableError);
    // Unbounded, the call waits for replies the black hole never lets through.
    expect(performance.now() - startedAt).toBeLessThan(300 + 500 + LOAD_SLACK_MS);
    proxy.setMode(passThrough);
    // The held join reaches the server and wins there (the document appears); the leave must
    // follow, well before the entry's 10 s lease would end. Read the raw document: a read
    // before the held bytes arrive would find the key free too.
    await eventually(async () => {
      const [raw] = await kit.rawLocks();
      return raw !== undefined && (raw.line as unknown[]).length === 0;
    }, 3_000);
    expect((await observer.inspect('black-hole'))?.held).toBe(false);
    const taken = await observer.tryAcquire('black-hole');
    expect(taken).not.toBeNull();
    await taken?.release();
  });
});
