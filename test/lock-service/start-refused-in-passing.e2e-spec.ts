// Outages: `start()` (and the module's start-up) settles within `operationTimeoutMs`, and "a
// step-down or another error MongoDB may heal is retried within that time"; renewals, releases
// and waits retry the refusals that may pass (Interrupted, InternalError). The start retried
// only MongoDB being unavailable: one `createIndexes` refused with Interrupted failed the start
// with MongoLockError, so the application did not boot, and an `events$` subscriber that was
// starting the service errored for good ("a start that fails otherwise would fail again").
import { firstValueFrom, take, toArray } from 'rxjs';
import { LockService } from '../../lib/lock.service';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

describe('start() refused once with an error that may pass', () => {
  const kit = LockTestKit.forSuite();

  async function refuseCreateIndexesOnce(errorCode: number): Promise<void> {
    const admin = await kit.client();
    await admin.db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['createIndexes'], errorCode },
    });
  }

  it.each([
    ['Interrupted', 11601],
    ['InternalError', 1],
  ])('starts when createIndexes was refused once with %s', async (_name, errorCode) => {
    await refuseCreateIndexesOnce(errorCode);
    const service = new LockService(kit.options({ operationTimeoutMs: 5_000 }));
    try {
      await service.start();
      const handle = await service.acquire('after-refusal', { timeoutMs: 2_000 });
      await handle.release();
    } finally {
      await service.close();
    }
  });

  it('events$ that starts the service does not error', async () => {
    await refuseCreateIndexesOnce(11601);
    const service = new LockService(kit.options({ operationTimeoutMs: 5_000 }));
    const other = await kit.service();
    try {
      const events = firstValueFrom(service.events$.pipe(take(1), toArray()));
      // Once it flows, a change is reported.
      const deadline = Date.now() + 10_000;
      while (!service.diagnostics.eventsFlowing && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const handle = await other.acquire('seen', { timeoutMs: 2_000 });
      await handle.release();
      expect((await events).map((event) => event.key)).toEqual(['seen']);
    } finally {
      await service.close();
    }
  });
});
