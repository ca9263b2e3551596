// Adversarial review, part 2: holding and releasing. Each test reproduces one promise that the
// review found broken (fixed since) and now passes.
import { MongoServerError, type Document } from 'mongodb';
import { LockNotAcquiredError, LockStoreUnavailableError } from '../../../lib/errors';
import { RENEW_PIPELINE } from '../../../lib/store/line/line-pipelines';
import { commandOf, interceptedClient } from '../../support/intercepted-collection';
import { eventually, LockTestKit, sleep } from '../lock-test-kit';
import { LOAD_SLACK_MS } from '../../support/load-slack';
import { ReplyDelayProxy } from '../../support/reply-delay-proxy';
import {
  canTake,
  describeWithFailPoints,
  faultTools,
  settleWithin,
  writeConcernTimeout,
} from './kit';

jest.setTimeout(30_000);

describeWithFailPoints('adversarial review: holding and releasing', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient, rawLock } = faultTools(kit);

  it('a release applied while the lease was live resolves, even if its reply comes after the local deadline', async () => {
    const target = new URL(kit.mongo.uri);
    const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
    await proxy.start();
    try {
      const locks = await kit.service({
        uri: `mongodb://127.0.0.1:${proxy.port}/?directConnection=true`,
      });
      // A lease long enough that the release, sent well before the local deadline, is applied
      // before the server's lease end even if a late timer on a loaded machine delays it.
      const handle = await locks.acquire('late-reply:k', { ttlMs: 6_000 });
      const serverEnd = ((await rawLock('late-reply:k'))?.line as { e: Date }[])[0].e.getTime();
      const localEnd = handle.expiresAt.getTime();
      // Release 1.5 s before the local deadline (1.8 s before the server's); the server applies it
      // at once (lease live), its reply reaches us 2.5 s later, 1 s after the local deadline.
      await sleep(Math.max(0, localEnd - Date.now() - 1_500));
      const replyHeld = proxy.holdNextReply('findAndModify', 2_500);
      const releasing = settleWithin(handle.release(), 6_000);
      await replyHeld;
      const appliedAt = Date.now();
      expect(await rawLock('late-reply:k')).toMatchObject({ line: [] });
      expect(appliedAt).toBeLessThan(serverEnd);

      const released = await releasing;
      // The reply did come after the local deadline.
      expect(Date.now()).toBeGreaterThan(localEnd);
      expect(released.error).toBeUndefined();
      expect(released.status).toBe('resolved');
    } finally {
      await kit.cleanup();
      await proxy.stop();
    }
  });

  it('extend() after an unconfirmed release does not resolve without renewing', async () => {
    const client = await appClient('extend-after');
    const locks = await kit.service({ client });
    const other = await kit.service();
    const handle = await locks.acquire('extend:k', { ttlMs: 5_000 });
    await failPoint({ times: 1 }, writeConcernTimeout('extend-after'));
    await expect(handle.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);
    // The release was applied: another holder can take the key.
    const next = await other.acquire('extend:k', { ttlMs: 10_000 });

    const before = handle.expiresAt.getTime();
    const extended = await settleWithin(handle.extend(10_000), 3_000);
    // Either extend() says it cannot renew (lost, or released), or it did renew. It may not
    // report success while another holder has the key.
    if (extended.status === 'resolved') {
      expect(handle.expiresAt.getTime()).toBeGreaterThan(before + 4_000);
    } else {
      expect(extended.status).toBe('rejected');
    }
    expect(handle.signal.aborted || extended.status === 'rejected').toBe(true);
    await next.release();
  });

  it('a multi-key acquire whose wait for its last key ends while MongoDB hangs settles within timeoutMs + 1 s', async () => {
    const client = await appClient('hang-multi');
    const locks = await kit.service({ client, operationTimeoutMs: 4_000 });
    const other = await kit.service();
    const blocker = await other.acquire('hang:b', { ttlMs: 20_000 });
    const started = performance.now();
    const acquiring = settleWithin(
      locks.acquire(['hang:a', 'hang:b'], { timeoutMs: 2_000, ttlMs: 20_000 }),
      15_000,
    );
    // 'hang:a' is taken and 'hang:b' waits in line; then MongoDB hangs for this service (1.2 s
    // in, before the deadline), so that the leave of 'hang:b' and the give-back of 'hang:a'
    // hang when the wait ends at the deadline.
    await eventually(() => locks.diagnostics.waiters === 1, 2_000);
    await sleep(Math.max(0, 1_200 - (performance.now() - started)));
    const before = await failPoint('alwaysOn', {
      failCommands: ['findAndModify'],
      appName: 'hang-multi',
      blockConnection: true,
      blockTimeMS: 10_000,
    });
    const result = await acquiring;
    const hung = (await failPoint('off')) - before;
    await blocker.release();
    expect(result.status).toBe('rejected');
    expect(result.error).toBeInstanceOf(LockNotAcquiredError); // it was in line
    // acquire settles within timeoutMs + 1 s (operationTimeoutMs is longer). Waiting for its
    // leave and give-back, each bounded by operationTimeoutMs, it would take 6 s or more.
    expect(result.ms).toBeLessThan(2_000 + 1_000 + LOAD_SLACK_MS);
    expect(hung).toBeGreaterThan(0); // a lock write of the call hung
  });

  it('close() while a multi-key acquisition renews its first key hands out no lock and leaves none held', async () => {
    // The renewal of 'refresh:a' while 'refresh:b' is awaited is refused (a refusal that does
    // not pass), so 'refresh:a' is renewed again before the handle is handed out.
    let refused = false;
    const client = interceptedClient(await appClient('close-refresh'), async (target, args) => {
      const filter = args[0] as Document;
      if (!refused && filter._id === 'refresh:a' && commandOf(args).pipeline === RENEW_PIPELINE) {
        refused = true;
        throw new MongoServerError({ message: 'Document failed validation', code: 121 });
      }
      return target.findOneAndUpdate(...args);
    });
    const locks = await kit.service({ client, operationTimeoutMs: 500 });
    const other = await kit.service();
    const blocker = await other.acquire('refresh:b', { ttlMs: 10_000 });
    const acquiring = locks
      .acquire(['refresh:a', 'refresh:b'], { ttlMs: 4_000, timeoutMs: 5_000 })
      .then(
        (handle) => handle,
        (error: unknown) => error,
      );
    await eventually(() => locks.diagnostics.waiters === 1, 2_000);
    await eventually(() => refused, 3_000);
    // 'refresh:b' is ours once the blocker leaves (its entry leads: no write); the renewal of
    // 'refresh:a' that follows (and any later lock write of this service) takes 400 ms.
    const before = await failPoint('alwaysOn', {
      failCommands: ['findAndModify'],
      appName: 'close-refresh',
      blockConnection: true,
      blockTimeMS: 400,
    });
    await blocker.release();
    await eventually(() => locks.diagnostics.waiters === 0, 2_000);
    const closing = locks.close();
    const outcome = await acquiring;
    await closing;
    const gaveUpAt = performance.now();
    // No handle after shutdown began; whatever the call took is free within one
    // operationTimeoutMs (plus slack) of it giving up.
    expect(outcome).toBeInstanceOf(Error);
    await sleep(Math.max(0, 900 - (performance.now() - gaveUpAt)));
    expect(await canTake(other, 'refresh:a')).toBe(true);
    expect(await canTake(other, 'refresh:b')).toBe(true);
    expect(await failPoint('off')).toBeGreaterThan(before); // the renewal was slow
  });
});
