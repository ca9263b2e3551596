// The testing module under Jest's modern fake timers (its store's clock is Date.now, so they
// move it too): a waiting call still goes on at each release, with no timer advanced. The
// library's only wait for the event loop's next turn is on MongoDB's change streams.
import type { TestingModule } from '@nestjs/testing';
import { LockService } from '../../lib';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { eventually, startTestingModule } from './testing-kit';

/** Promise continuations only: no timer, real or fake, gets to run. */
async function settlePromises(rounds = 2_000): Promise<void> {
  for (let round = 0; round < rounds; round++) await Promise.resolve();
}

describe('MongoLockTestingModule under fake timers', () => {
  let moduleRef: TestingModule;
  let locks: LockService;
  let store: LockTestingStore;

  beforeEach(async () => {
    moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ holderId: 'app' })],
    });
    locks = moduleRef.get(LockService);
    store = moduleRef.get(LockTestingStore);
  });

  afterEach(async () => {
    jest.useRealTimers();
    await moduleRef.close();
  });

  it('each release lets its waiting call go on, one after the other', async () => {
    const a = await store.holdAs('a', 'other');
    const b = await store.holdAs('b', 'other');
    const taken: string[] = [];
    const waitA = locks.acquire('a', { timeoutMs: 20_000 }).then((handle) => {
      taken.push('a');
      return handle;
    });
    const waitB = locks.acquire('b', { timeoutMs: 20_000 }).then((handle) => {
      taken.push('b');
      return handle;
    });
    await eventually(() => locks.diagnostics.streamEstablished && locks.diagnostics.waiters === 2);
    jest.useFakeTimers();
    await a.release();
    await settlePromises();
    expect(taken).toEqual(['a']);
    await b.release();
    await settlePromises();
    expect(taken).toEqual(['a', 'b']);
    jest.useRealTimers();
    await (await waitA).release();
    await (await waitB).release();
  });
});
