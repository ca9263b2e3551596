import type { TestingModule } from '@nestjs/testing';
import { LockNotAcquiredError, LockService } from '../../lib';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { outcomeAfter, startTestingModule } from './testing-kit';

jest.setTimeout(30_000);

/**
 * Under Jest's modern fake timers, on before the application starts (as a test of the user's
 * would have them), a waiting call follows fake time alone: it neither needs real time to pass
 * nor ends while fake time stands still.
 */
describe('the testing kit under legacy fake timers (performance.now() stays real)', () => {
  it('a wait still ends at its timeoutMs of real time', async () => {
    jest.useFakeTimers({ legacyFakeTimers: true });
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ holderId: 'app' })],
    });
    try {
      await moduleRef.get(LockTestingStore).holdAs('k', 'other');
      const waiting = moduleRef.get(LockService).acquire('k', { timeoutMs: 300 });
      // Broken: its only timer is a fake one that nobody advances, and it waits for ever.
      await expect(waiting).rejects.toBeInstanceOf(LockNotAcquiredError);
    } finally {
      jest.useRealTimers();
      await moduleRef.close();
    }
  });
});

describe('the testing kit under fake timers: waits follow fake time', () => {
  let moduleRef: TestingModule;
  let store: LockTestingStore;
  let locks: LockService;

  beforeEach(async () => {
    jest.useFakeTimers();
    moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ holderId: 'app' })],
    });
    store = moduleRef.get(LockTestingStore);
    locks = moduleRef.get(LockService);
  });

  afterEach(async () => {
    jest.useRealTimers();
    await moduleRef.close();
  });

  it('a waiter takes the key once fake time passes the holder’s lease', async () => {
    await store.holdAs('k', 'other'); // a 30 s lease
    const waiting = locks.acquire('k', { timeoutMs: 60_000 });
    await jest.advanceTimersByTimeAsync(31_000);
    // Broken: the waiter looks again on a real timer, a third of its lease (10 s) later.
    const outcome = await outcomeAfter(waiting, 1_000 + LOAD_SLACK_MS);
    expect(outcome).toMatchObject({ key: 'k' });
    await (outcome as { release(): Promise<void> }).release();
  });

  it('a wait ends at its timeoutMs of fake time, and not while fake time stands still', async () => {
    await store.holdAs('k', 'other');
    const waiting = locks.acquire('k', { timeoutMs: 5_000 });
    await jest.advanceTimersByTimeAsync(4_000);
    expect(await outcomeAfter(waiting, 300)).toBe('pending');
    await jest.advanceTimersByTimeAsync(2_000);
    // Broken: its timer counts real time, 5 s from the call.
    const outcome = await outcomeAfter(waiting, 1_000 + LOAD_SLACK_MS);
    expect(outcome).toBeInstanceOf(LockNotAcquiredError);
  });
});
