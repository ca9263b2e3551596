import { setTimeout as realSleep } from 'node:timers/promises';
import { LockNotAcquiredError, LockService } from '../../lib';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { startTestingModule } from './testing-kit';

jest.setTimeout(30_000);

/** How `promise` stands after up to `ms` of real time: 'pending' if still open. */
async function outcomeAfter(promise: Promise<unknown>, ms: number): Promise<unknown> {
  let outcome: unknown = 'pending';
  promise.then(
    (value) => (outcome = value),
    (error: unknown) => (outcome = error),
  );
  for (let waited = 0; waited < ms && outcome === 'pending'; waited += 20) await realSleep(20);
  return outcome;
}

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
