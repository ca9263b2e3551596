import { LockNotAcquiredError, LockService } from '../../lib';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { outcomeAfter, startTestingModule } from './testing-kit';

jest.setTimeout(30_000);

/**
 * docs/testing.md: under legacy fake timers (which leave `performance.now()` real) waits end on
 * real time; under modern ones, on fake time. A campaign with a `timeoutMs` is such a wait, as
 * an `acquire` of the same key is.
 */
describe.each([
  ['legacy', true],
  ['modern', false],
])('campaign({ timeoutMs }) under %s fake timers', (_name, legacyFakeTimers) => {
  it('gives up at its timeoutMs, as acquire does, while another instance leads', async () => {
    jest.useFakeTimers({ legacyFakeTimers });
    const store = new LockTestingStore();
    await store.holdAs('nestjs-mongo-lock:leader:boss', 'other-instance');
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ store, holderId: 'app', shutdownGraceMs: 0 })],
    });
    try {
      const locks = moduleRef.get(LockService);
      const acquiring = locks.acquire('nestjs-mongo-lock:leader:boss', { timeoutMs: 300 });
      const campaign = locks.leadership('boss').campaign({ timeoutMs: 300 });
      if (!legacyFakeTimers) await jest.advanceTimersByTimeAsync(400);
      expect(await outcomeAfter(acquiring, 1_000 + LOAD_SLACK_MS)).toBeInstanceOf(
        LockNotAcquiredError,
      );
      // Broken under legacy fake timers: its only timer is a fake one nobody advances.
      expect(await outcomeAfter(campaign, 1_000 + LOAD_SLACK_MS)).toBeInstanceOf(
        LockNotAcquiredError,
      );
    } finally {
      jest.useRealTimers();
      await moduleRef.close();
    }
  });
});
