import { NEVER } from 'rxjs';
import type { LockState } from '../interfaces/lock-state.interface';
import { MAX_TIMER_MS } from '../util/timers';
import { watchLeader } from './leader-watch';

describe('watchLeader', () => {
  it('reads once for a lease longer than a timer can wait, not in a loop', async () => {
    let reads = 0;
    const state = {
      held: true,
      holderId: 'a',
      fence: 1n,
      acquiredAt: new Date(),
      remainingMs: MAX_TIMER_MS,
    } as unknown as LockState;
    const subscription = watchLeader(
      {
        inspect: () => {
          reads += 1;
          return Promise.resolve(state);
        },
        events$: NEVER,
        eventsFlow: () => true,
        pollIntervalMs: 60_000,
      },
      'k',
    ).subscribe();
    // Past 2^31 - 1 ms, Node fires a timer at once: the watch would read again every ms.
    await new Promise((resolve) => setTimeout(resolve, 50));
    subscription.unsubscribe();
    expect(reads).toBe(1);
  });
});
