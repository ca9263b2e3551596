// A call of several keys renews an earlier key while it waits for a later one. If MongoDB fails
// that renewal in passing (ExceededTimeLimit, twice over: the driver's retry too), with most of
// the call's timeoutMs left, it must try again, as a wait for one key retries its commands until its
// deadline, not fail at once with LockStoreUnavailableError and give both keys back.
import type { LockHandle } from '../../lib';
import { eventually, LockTestKit, sleep } from './lock-test-kit';
import { describeWithFailPoints, faultTools } from './adversarial/kit';

jest.setTimeout(60_000);

describeWithFailPoints(
  'a call of several keys whose renewal before hand-out fails in passing',
  () => {
    const kit = LockTestKit.forSuite();
    const { failPoint, appClient } = faultTools(kit);

    it('tries again within its timeoutMs and is handed the lock', async () => {
      const a = await kit.service();
      const b = await a.acquire('blip:b', { ttlMs: 20_000 });
      const client = await appClient('mk-blip');
      const w = await kit.service({ client });
      const startedAt = performance.now();
      const call = w
        .acquire(['blip:a', 'blip:b'], { ttlMs: 6_000, timeoutMs: 15_000 })
        .catch((error: unknown) => error);
      await eventually(async () => (await a.inspect('blip:b'))?.waiting === 1);
      // Past the wait's renewal of its entry on blip:b (2 s in), before the next (4 s in).
      await sleep(2_500 - (performance.now() - startedAt));
      // W's next lock write, the renewal of blip:a (half of its 6 s lease is gone by then), the
      // driver's retry of it, and the library's next try and its retry fail with ExceededTimeLimit.
      const armed = await failPoint(
        { times: 4 },
        { failCommands: ['findAndModify'], appName: 'mk-blip', errorCode: 262, errorLabels: [] },
      );
      await sleep(3_300 - (performance.now() - startedAt));
      await b.release();
      const outcome = await call;
      if (typeof (outcome as LockHandle).release === 'function') {
        await (outcome as LockHandle).release();
      }
      expect(await failPoint('off')).toBe(armed + 4);
      // Broken: LockStoreUnavailableError ("MongoDB is unavailable (renew)"), 12 s before its end.
      expect(outcome).not.toBeInstanceOf(Error);
    });
  },
);
