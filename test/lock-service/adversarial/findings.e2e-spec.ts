// Adversarial review: each test reproduces one promise of the library that the review found
// broken (fixed since); each now passes, and proves that its fault fired.
import type { CommandStartedEvent } from 'mongodb';
import { LockServiceClosedError, LockStoreUnavailableError } from '../../../lib/errors';
import { LockService } from '../../../lib/lock.service';
import { eventually, LockTestKit, sleep } from '../lock-test-kit';
import {
  canTake,
  describeWithFailPoints,
  faultTools,
  settleWithin,
  writeConcernTimeout,
} from './kit';
import { LOAD_SLACK_MS } from '../../support/load-slack';

jest.setTimeout(30_000);

describeWithFailPoints('adversarial review: broken promises', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient, rawLock } = faultTools(kit);

  describe('bound: every acquire settles within timeoutMs + operationTimeoutMs', () => {
    it('a multi-key acquire against a slow (not dead) server settles within timeoutMs + operationTimeoutMs', async () => {
      const client = await appClient('slow-multi');
      const locks = await kit.service({ client, operationTimeoutMs: 1_000 });
      // Every lock write takes 900 ms on the server: slow, but each one answers in time.
      const before = await failPoint('alwaysOn', {
        failCommands: ['findAndModify'],
        appName: 'slow-multi',
        blockConnection: true,
        blockTimeMS: 900,
      });
      const keys = ['slow:a', 'slow:b', 'slow:c', 'slow:d', 'slow:e'];
      const acquiring = await settleWithin(
        locks.acquire(keys, { timeoutMs: 100, ttlMs: 10_000 }),
        10_000,
      );
      const slowWrites = (await failPoint('off')) - before;
      if (acquiring.status === 'resolved') await acquiring.value!.release();
      // timeoutMs + operationTimeoutMs, plus slack for a loaded machine. With a budget per
      // command instead of per call, its five writes take 5 x 900 ms, over the bound.
      expect(acquiring.ms).toBeLessThan(100 + 1_000 + LOAD_SLACK_MS);
      expect(slowWrites).toBeGreaterThan(0);
    });

    it('a multi-key tryAcquire against a slow server settles within operationTimeoutMs', async () => {
      const client = await appClient('slow-try');
      const locks = await kit.service({ client, operationTimeoutMs: 1_000 });
      const before = await failPoint('alwaysOn', {
        failCommands: ['findAndModify'],
        appName: 'slow-try',
        blockConnection: true,
        blockTimeMS: 900,
      });
      const keys = ['try:a', 'try:b', 'try:c', 'try:d', 'try:e'];
      const trying = await settleWithin(locks.tryAcquire(keys), 10_000);
      const slowWrites = (await failPoint('off')) - before;
      if (trying.status === 'resolved') await trying.value?.release();
      // With a budget per command instead of per call: 5 x 900 ms, over the bound.
      expect(trying.ms).toBeLessThan(0 + 1_000 + LOAD_SLACK_MS);
      expect(slowWrites).toBeGreaterThan(0);
    });
  });

  describe('no false LockLostError on a successful release', () => {
    it('release() in flight when releaseAllHeld() runs resolves: the release was confirmed', async () => {
      const client = await appClient('release-race', { monitorCommands: true });
      const locks = await kit.service({ client });
      const handle = await locks.acquire('race:k', { ttlMs: 10_000 });
      const before = await failPoint(
        { times: 1 },
        {
          failCommands: ['findAndModify'],
          appName: 'release-race',
          blockConnection: true,
          blockTimeMS: 300,
        },
      );
      // releaseAllHeld() starts as the release's write is sent (held 300 ms by the server), so
      // it meets a release in flight; `settledAtRevoke` proves the release had no answer yet.
      let releaseSettled = false;
      let settledAtRevoke: boolean | undefined;
      let revoking: Promise<number> | undefined;
      client.on('commandStarted', (event: CommandStartedEvent) => {
        if (event.commandName !== 'findAndModify' || revoking) return;
        settledAtRevoke = releaseSettled;
        revoking = locks.releaseAllHeld();
      });
      const releasing = settleWithin(
        handle.release().finally(() => (releaseSettled = true)),
        3_000,
      );
      await eventually(() => revoking !== undefined, 3_000);
      await revoking;
      const released = await releasing;
      expect(settledAtRevoke).toBe(false);
      expect(await rawLock('race:k')).toMatchObject({ line: [] });
      expect(released.error).toBeUndefined();
      expect(released.status).toBe('resolved');
      expect(await failPoint('off')).toBe(before + 1); // the release was held up
    });
  });

  describe('waiters never miss a release', () => {
    it('a local waiter wakes when a release of this process is applied but its reply is lost', async () => {
      const client = await appClient('held-here');
      const locks = await kit.service({ client });
      const other = await kit.service();
      const held = await locks.acquire('here:k', { ttlMs: 20_000 });
      // A second caller of the same service waits (it finds the key held by its own process).
      // Its lease is longer than what is left of the first's, so the release is a write.
      const waiting = settleWithin(
        locks.acquire('here:k', { ttlMs: 60_000, timeoutMs: 4_000 }),
        6_000,
      );
      await eventually(
        () => locks.diagnostics.waiters === 1 && locks.diagnostics.streamEstablished,
        3_000,
      );
      await sleep(100);

      await failPoint({ times: 1 }, writeConcernTimeout('held-here'));
      await expect(held.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);
      const freedAt = performance.now();

      const result = await waiting;
      if (result.status === 'resolved') await result.value!.release();
      // The key was free all along: another service could take it at any time.
      expect(await canTake(other, 'here:k')).toBe(true);
      expect(result.error).toBeUndefined();
      expect(result.status).toBe('resolved');
      // A missed wake-up waits out timeoutMs (4 s): rejected, and over this bound.
      expect(performance.now() - freedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    });

    it('a give-back after extend() is retried while the extended lease runs, not the first one', async () => {
      const client = await appClient('extended-give-back');
      const locks = await kit.service({ client, operationTimeoutMs: 300 });
      const other = await kit.service();
      const handle = await locks.acquire('extended:k', { ttlMs: 1_000 });
      await handle.extend(30_000);
      // This client's lock writes fail for 2 s: longer than the 1 s lease the handle was taken
      // with, far shorter than the 30 s it was extended to.
      await failPoint('alwaysOn', {
        failCommands: ['findAndModify'],
        appName: 'extended-give-back',
        closeConnection: true,
      });
      const revoking = locks.releaseAllHeld().catch((error: unknown) => error);
      expect(handle.signal.aborted).toBe(true);
      await sleep(2_000);
      await failPoint('off');
      await revoking;
      // Given up after the first lease, the entry holds the key for its 30 s: the wait times out.
      const taken = await settleWithin(other.acquire('extended:k', { timeoutMs: 6_000 }), 8_000);
      expect(taken.status).toBe('resolved');
      await taken.value?.release();
    });
  });
});

describeWithFailPoints('adversarial review: shutdown', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('close() right after an attempt timed out on a slow server waits for its late win and gives it back', async () => {
    const locks = await kit.service({ operationTimeoutMs: 400 }); // it owns its client
    const other = await kit.service();
    // The next lock write (this service's attempt) runs 600 ms late: a slow server, not a
    // dead one. It lands within one operationTimeoutMs of close() starting.
    await failPoint(
      { times: 1 },
      { failCommands: ['findAndModify'], blockConnection: true, blockTimeMS: 600 },
    );
    const tried = await settleWithin(locks.tryAcquire('close:k', { ttlMs: 10_000 }), 3_000);
    expect(tried.status).toBe('rejected');
    expect(tried.error).toBeInstanceOf(LockStoreUnavailableError);
    const closing = settleWithin(locks.close(), 3_000);
    await sleep(700); // the write has landed
    await closing;
    // Not given back, the key stays held for its 10 s lease.
    const free = await settleWithin(
      eventually(() => canTake(other, 'close:k'), 5_000),
      6_000,
    );
    expect(free.status).toBe('resolved');
  });

  it('close() while the change stream is still opening does not wait for it, and closes it', async () => {
    const client = await appClient('slow-stream');
    const shutdownGraceMs = 200;
    const locks = new LockService(
      kit.options({ client, operationTimeoutMs: 6_000, shutdownGraceMs, ensureIndexes: false }),
    );
    // The service's change stream opens 4 s late: connected, but not started yet.
    const delayed = await failPoint(
      { times: 1 },
      {
        failCommands: ['aggregate'],
        appName: 'slow-stream',
        blockConnection: true,
        blockTimeMS: 4_000,
      },
    );
    const starting = settleWithin(locks.start(), 10_000);
    await sleep(300);
    const closed = await settleWithin(locks.close(), 10_000);
    // Waiting for the start, close() takes the stream's 4 s.
    expect(closed.ms).toBeLessThan(shutdownGraceMs + 2_000 + LOAD_SLACK_MS);
    expect((await failPoint('off')) - delayed).toBe(1);
    expect(await starting).toMatchObject({
      status: 'rejected',
      error: expect.any(LockServiceClosedError),
    });
    // The stream the start was opening stays closed.
    expect(locks.diagnostics.streamOpen).toBe(false);
  });
});
