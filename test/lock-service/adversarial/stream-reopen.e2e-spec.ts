// A server whose getMore keeps failing while aggregate works: the service reopens its change
// stream on a growing pause (100 ms, doubling up to 1 s), even when each reopened stream's
// first batch brings changes (other keys' releases). It used to loop every 50 ms there. Once a
// reopened stream's reads go through, the pause starts again from 100 ms.
import { LockTestKit, eventually, sleep } from '../lock-test-kit';
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
    // Opened at start, then 100, 300, 700, 1500 and 2500 ms after the first failed read
    // (itself up to a 1 s await after the fail point is set).
    expect(opened).toBeGreaterThanOrEqual(3); // it was reopened, again and again
    expect(opened).toBeLessThanOrEqual(6);
    expect(failedReads).toBeGreaterThanOrEqual(3); // it did fail, again and again
  });

  it('is reopened 100 ms after a failure again once a reopened stream has read', async () => {
    const appName = 'reopen-reset';
    const locks = await kit.service({
      client: await appClient(appName),
      safetyPollIntervalMs: 60_000,
    });
    const failReads = { failCommands: ['getMore'], appName, errorCode: 2, errorLabels: [] };
    // Reads that keep failing grow the pause to its 1 s cap.
    await failPoint('alwaysOn', failReads);
    await sleep(3_000);
    await failPoint('off');
    // A stream reopened now reads: its first await (up to 1 s) ends, without a change.
    await eventually(() => locks.diagnostics.streamOpen, 3_000);
    await sleep(1_500);
    const opened = locks.diagnostics.streamsOpened;
    await failPoint({ times: 1 }, failReads);
    await eventually(() => !locks.diagnostics.streamOpen, 3_000);
    const failedAt = performance.now();
    await eventually(() => locks.diagnostics.streamsOpened > opened, 3_000);
    // 100 ms and the reopening's first reply; a pause grown to 1 s would be 1 s.
    expect(performance.now() - failedAt).toBeLessThan(700);
    expect(locks.diagnostics.streamOpen).toBe(true);
  });
});
