// Under Jest's modern fake timers (performance.now() fake too, so it stands still between
// ticks), a call of several keys waiting for a later key keeps its first key renewed
// (`keepRenewed`, lib/earlier-holds.ts): it sleeps until less than half the lease is left, then
// renews each hold with *less* than half left. Woken at exactly that moment (a fake timer fires
// at its due time to the millisecond, and the lease end is a whole number of ms), the hold has
// exactly half its lease left: it is not renewed, the next wake-up is due now, `wakeUp` resolves
// at once, and the loop spins in microtasks for ever: the process hangs (no timer, not even
// Jest's, ever runs again). Here `performance.now()` counts its calls and, past a bound no
// healthy wait reaches, moves on by itself so that the test can end and say so. Now a hold is
// renewed once half its lease is gone, so the first key is renewed as fake time passes.
import type { TestingModule } from '@nestjs/testing';
import { LockService } from '../../lib';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { eventually, startTestingModule } from '../testing/testing-kit';

jest.setTimeout(30_000);

describe('a call of several keys under fake timers, waiting for its later key', () => {
  let moduleRef: TestingModule;
  let restoreNow: (() => void) | undefined;

  afterEach(async () => {
    restoreNow?.();
    jest.useRealTimers();
    await moduleRef.close();
  });

  it('renews its first key as fake time passes, without spinning', async () => {
    jest.useFakeTimers();
    moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ holderId: 'app' })],
    });
    const store = moduleRef.get(LockTestingStore);
    const locks = moduleRef.get(LockService);
    await store.holdAs('spin:b', 'other', { ttlMs: 60_000 });
    const call = locks.acquire(['spin:a', 'spin:b'], { ttlMs: 1_000, timeoutMs: 30_000 });
    call.catch(() => undefined);
    await eventually(async () => (await locks.inspect('spin:a'))?.holderId === 'app');

    // A spin guard: past this many readings of the clock without fake time moving, the clock
    // moves 1 ms per reading (which ends the spin), and the test knows.
    const fakeNow = performance.now.bind(performance);
    let readings = 0;
    let lastFake = fakeNow();
    let spun = false;
    const original = Object.getOwnPropertyDescriptor(performance, 'now');
    Object.defineProperty(performance, 'now', {
      configurable: true,
      value: () => {
        const now = fakeNow();
        if (now !== lastFake) {
          lastFake = now;
          readings = 0;
        }
        readings += 1;
        if (readings < 100_000) return now;
        spun = true;
        return now + (readings - 100_000);
      },
    });
    restoreNow = () => {
      if (original) Object.defineProperty(performance, 'now', original);
      else delete (performance as { now?: unknown }).now;
    };

    // Past half of the first key's 1 s lease (its renewal is due at 450 ms of fake time).
    await jest.advanceTimersByTimeAsync(700);
    restoreNow();
    restoreNow = undefined;
    // Broken: true (the keep-alive loop read the clock without end at 450 ms of fake time).
    expect(spun).toBe(false);
    expect((await locks.inspect('spin:a'))?.holderId).toBe('app');
  });
});
