import { defer, NEVER, Subject, throwError } from 'rxjs';
import type { LockEvent } from '../interfaces/lock-state.interface';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
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

  it('goes on when events fail to start (MongoDB away at first), and listens again', async () => {
    let state: LockState | null = null;
    let starts = 0;
    const events = new Subject<LockEvent>();
    const seen: (string | null)[] = [];
    let failed: unknown;
    const subscription = watchLeader(
      {
        inspect: () => Promise.resolve(state),
        // The first subscription fails as a service that could not start; later ones work.
        events$: defer(() =>
          starts++ === 0 ? throwError(() => new LockStoreUnavailableError('away')) : events,
        ),
        eventsFlow: () => starts > 1,
        pollIntervalMs: 100,
        safetyPollIntervalMs: 60_000,
      },
      'k',
    ).subscribe({
      next: (leader) => seen.push(leader?.holderId ?? null),
      error: (error: unknown) => (failed = error),
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(failed).toBeUndefined();
    expect(starts).toBe(2);
    state = {
      held: true,
      holderId: 'c',
      fence: 3n,
      acquiredAt: new Date(),
      remainingMs: 60_000,
    } as unknown as LockState;
    events.next({ key: 'k' } as LockEvent);
    await new Promise((resolve) => setTimeout(resolve, 50));
    subscription.unsubscribe();
    expect(seen).toEqual([null, 'c']);
  });
});
