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
        safetyPollIntervalMs: 60_000,
      },
      'k',
    ).subscribe();
    // Past 2^31 - 1 ms, Node fires a timer at once: the watch would read again every ms.
    await new Promise((resolve) => setTimeout(resolve, 50));
    subscription.unsubscribe();
    expect(reads).toBe(1);
  });

  it('reads again at the safety interval while events flow and nobody leads', async () => {
    // A stream reopened afresh has missed the change: nothing else would show the new leader.
    let state: LockState | null = null;
    const seen: (string | null)[] = [];
    const subscription = watchLeader(
      {
        inspect: () => Promise.resolve(state),
        events$: NEVER,
        eventsFlow: () => true,
        pollIntervalMs: 60_000,
        safetyPollIntervalMs: 100,
      },
      'k',
    ).subscribe((leader) => seen.push(leader?.holderId ?? null));
    await new Promise((resolve) => setTimeout(resolve, 50));
    state = {
      held: true,
      holderId: 'b',
      fence: 2n,
      acquiredAt: new Date(),
      remainingMs: 60_000,
    } as unknown as LockState;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    subscription.unsubscribe();
    expect(seen).toEqual([null, 'b']);
  });
});
