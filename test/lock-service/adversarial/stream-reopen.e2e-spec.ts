// A server whose getMore keeps failing while aggregate works: the service reopens its change
// stream on a growing pause (100 ms, doubling up to 1 s), even when each reopened stream's
// first batch brings changes (other keys' releases). It used to loop every 50 ms there. Once a
// reopened stream's reads go through, the pause starts again from 100 ms.
import type {
  CommandFailedEvent,
  CommandStartedEvent,
  CommandSucceededEvent,
  Document,
} from 'mongodb';
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
    const client = await appClient(appName, { monitorCommands: true });
    // The pause alone: from the last reply of the failed stream (the getMore's failure, or the
    // killCursors that closes it) to the aggregate that reopens it.
    let lastReplyAt = 0;
    let failedReads = 0;
    let reads = 0;
    const pauses: number[] = [];
    client.on('commandFailed', (event: CommandFailedEvent) => {
      if (event.commandName === 'getMore') failedReads += 1;
      if (['getMore', 'killCursors'].includes(event.commandName)) lastReplyAt = performance.now();
    });
    client.on('commandSucceeded', (event: CommandSucceededEvent) => {
      if (event.commandName === 'getMore') reads += 1;
      if (event.commandName === 'killCursors') lastReplyAt = performance.now();
    });
    client.on('commandStarted', (event: CommandStartedEvent) => {
      const reopens =
        event.commandName === 'aggregate' &&
        (event.command.pipeline as Document[] | undefined)?.[0]?.$changeStream !== undefined;
      if (reopens) pauses.push(performance.now() - lastReplyAt);
    });
    const locks = await kit.service({ client, safetyPollIntervalMs: 60_000 });
    const failReads = { failCommands: ['getMore'], appName, errorCode: 2, errorLabels: [] };
    // Reads that keep failing grow the pause to its 1 s cap (50 ms doubled at each of 5 failures).
    await failPoint('alwaysOn', failReads);
    await eventually(() => failedReads >= 5, 10_000);
    await failPoint('off');
    // A stream reopened now reads: one of its reads went through, so the next failure's pause
    // starts again from 100 ms (a failure of a later read: the next read is sent after it).
    const readsBefore = reads;
    await eventually(() => locks.diagnostics.streamOpen && reads > readsBefore, 5_000);
    const opened = locks.diagnostics.streamsOpened;
    const reopened = pauses.length;
    await failPoint({ times: 1 }, failReads);
    await eventually(() => pauses.length > reopened, 5_000);
    await eventually(() => locks.diagnostics.streamsOpened > opened, 3_000);
    expect(pauses).toHaveLength(reopened + 1);
    // 100 ms (and a late timer); a pause grown to its cap would be 1 s, less at most a few ms
    // (a timer counts from the event loop's cached time).
    expect(pauses[reopened]).toBeLessThan(900);
    expect(locks.diagnostics.streamOpen).toBe(true);
  });
});
