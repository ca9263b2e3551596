// A server whose getMore keeps failing while aggregate works: the change feed reopens the
// stream on its growing delay (50 ms, 200 ms, 500 ms, 1 s), even when each reopened stream's
// first batch brings changes (other keys' releases). It used to loop every 50 ms there.
import { LockTestKit, sleep } from '../lock-test-kit';
import { describeWithFailPoints, faultTools } from './kit';

jest.setTimeout(30_000);

describeWithFailPoints('a change stream whose getMore keeps failing', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('is reopened on the growing delay while other keys change hands', async () => {
    const appName = 'reopen-traffic';
    const holder = await kit.service();
    const other = await kit.service();
    const held = await holder.acquire('reopen:k', { ttlMs: 30_000 });
    const locks = await kit.service({
      client: await appClient(appName),
      safetyPollIntervalMs: 60_000,
    });
    const before = await failPoint('alwaysOn', {
      failCommands: ['getMore'],
      appName,
      errorCode: 2,
      errorLabels: [],
    });
    let churning = true;
    const churn = (async () => {
      for (let i = 0; churning; i++) {
        await (await other.acquire(`reopen:other${i % 5}`, { ttlMs: 30_000 })).release();
      }
    })();
    const waiting = locks.acquire('reopen:k', { timeoutMs: 10_000 }).catch(() => undefined);
    await sleep(3_000);
    const opened = locks.diagnostics.streamsOpened;
    churning = false;
    await churn;
    const failedReads = (await failPoint('off')) - before;
    await held.release();
    await (await waiting)?.release();
    // Opened at 0, 50, 250, 750 and 1750 ms (and up to 1 s more each, behind failing reads).
    expect(opened).toBeLessThanOrEqual(6);
    expect(failedReads).toBeGreaterThanOrEqual(3); // it did fail, again and again
  });
});
