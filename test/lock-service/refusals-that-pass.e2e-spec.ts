// Refusals that do not say nothing was written, and pass: an Interrupted killOp, an
// InternalError, TemporarilyUnavailable under cache pressure. A command refused so may have
// landed (the driver retries a write whose reply was lost and reports the retry's error), or
// not; every command goes by token, so each is retried as one MongoDB did not answer
// (outages-and-shutdown.md). A join refused so still fails its call, as documented.
import { firstValueFrom } from 'rxjs';
import type { LockHandle } from '../../lib';
import { eventually, LockTestKit, sleep } from './lock-test-kit';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { LOAD_SLACK_MS } from '../support/load-slack';

jest.setTimeout(60_000);

const PASSING_REFUSALS = [
  ['Interrupted', 11601],
  ['InternalError', 1],
  ['TemporarilyUnavailable', 365],
] as const;

const released = async (got: unknown) => {
  if (typeof (got as LockHandle).release === 'function') await (got as LockHandle).release();
};

describeWithFailPoints('refusals that may pass, retried by token', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);
  /** The next `command` of the client named `appName` is refused with `code`; the count before. */
  const refuseNext = (appName: string, code: number, command = 'findAndModify') =>
    failPoint({ times: 1 }, { failCommands: [command], appName, errorCode: code });

  describe.each(PASSING_REFUSALS)('%s', (_name, code) => {
    it('of a renewal: withLock finishes its work, never told of a loss', async () => {
      const locks = await kit.service({ client: await appClient('renew-refused') });
      let armed = 0;
      const result = await locks
        .withLock(
          `renew-refused:${code}`,
          async (lock) => {
            // The first renewal (a third into the 3 s lease) is refused; 2 s are left then.
            armed = await refuseNext('renew-refused', code);
            await sleep(2_500);
            return lock.signal.aborted ? 'told it was lost' : 'done';
          },
          { ttlMs: 3_000 },
        )
        .catch((error: unknown) => error);
      expect(await failPoint('off')).toBe(armed + 1);
      // Broken: the refused renewal marks the lock lost at once; withLock rejects with it.
      expect(result).toBe('done');
    });

    it('of a release: frees the key for a waiter elsewhere soon, not at its lease end', async () => {
      const a = await kit.service({ client: await appClient('release-refused') });
      const b = await kit.service();
      const held = await a.acquire(`release-refused:${code}`, { ttlMs: 12_000 });
      const before = await refuseNext('release-refused', code);
      await held.release().catch(() => undefined);
      const startedAt = performance.now();
      // Broken: the key stays held for the lease's 12 s, and this wait times out at 6 s.
      const next = await b
        .acquire(`release-refused:${code}`, { timeoutMs: 6_000 })
        .catch((error: unknown) => error);
      const waitedMs = performance.now() - startedAt;
      await released(next);
      expect(await failPoint('off')).toBe(before + 1);
      expect(next).not.toBeInstanceOf(Error);
      expect(waitedMs).toBeLessThan(1_000 + LOAD_SLACK_MS);
      await sleep(100);
      // The holder let go of it: it is never told, later, that its lock was lost.
      expect(held.lost).toBe(false);
      expect(held.signal.aborted).toBe(false);
    });

    it('of a waiting call’s renewal: it keeps waiting, and holds once the holder releases', async () => {
      const a = await kit.service();
      const key = `wait-refused:${code}`;
      const holder = await a.acquire(key, { ttlMs: 10_000 });
      const w = await kit.service({ client: await appClient('wait-refused') });
      const waiting = w
        .acquire(key, { ttlMs: 3_000, timeoutMs: 8_000 })
        .catch((error: unknown) => error);
      await eventually(async () => (await a.inspect(key))?.waiting === 1);
      // Its next lock write is the renewal of its waiting entry, 1 s into its 3 s lease.
      const armed = await refuseNext('wait-refused', code);
      const releasing = sleep(2_500).then(() => holder.release());
      const got = await waiting;
      await releasing;
      await released(got);
      expect(await failPoint('off')).toBe(armed + 1);
      // Broken: the call fails about 1 s in with MongoLockError ("Lock command renew failed").
      expect(got).not.toBeInstanceOf(Error);
    });

    it('of a look of waitForRelease: it looks again, and emits once the key is free', async () => {
      const holder = await kit.service();
      const key = `look-refused:${code}`;
      const held = await holder.acquire(key, { ttlMs: 30_000 });
      const watcher = await kit.service({ client: await appClient('look-refused') });
      const armed = await refuseNext('look-refused', code, 'find');
      const freed = firstValueFrom(watcher.waitForRelease(key)).then(
        () => 'emitted',
        (error: unknown) => error,
      );
      await sleep(300);
      await held.release();
      // Broken: the refused first look ends the wait with the server's error.
      expect(await freed).toBe('emitted');
      expect(await failPoint('off')).toBe(armed + 1);
    });
  });
});
