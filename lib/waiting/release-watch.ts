import type { Timestamp } from 'mongodb';
import type { LockChangeFeed } from './change-feed';
import { LEASE_END_MARGIN_MS, pollDelayMs } from './wait-timing';
import type { WaitTiming } from './wait-timing';
import { Wakeup } from './wakeup';

/** A key's liveness as a waiter needs it. */
export interface LeaseProbe {
  held: boolean;
  remainingMs: number;
  /** Monotonic time just before the read was sent. */
  sentAt: number;
  operationTime: Timestamp | undefined;
}

/**
 * Resolves once `key` is free: released (a change event or a local release says so) or its
 * lease ran out (the countdown ends and a fresh read agrees). Rejects with the signal's
 * reason when aborted. Takes no lock.
 *
 * @example
 * await waitUntilReleased('orders:42', feed, timing, () => probe('orders:42'), signal);
 */
export async function waitUntilReleased(
  key: string,
  feed: LockChangeFeed,
  timing: WaitTiming,
  probe: () => Promise<LeaseProbe>,
  signal: AbortSignal,
): Promise<void> {
  signal.throwIfAborted();
  const wakeup = new Wakeup();
  let released = false;
  let recheck: boolean;
  const onAbort = () => wakeup.wake();
  signal.addEventListener('abort', onAbort, { once: true });
  let unwatch: (() => void) | undefined;
  try {
    for (let round = 0; ; round += 1) {
      recheck = false;
      const lease = await probe();
      signal.throwIfAborted();
      if (!lease.held || released) return;
      unwatch ??= feed.watchKey(
        key,
        (reason) => {
          // A hold of ours that ended without freeing the key (lost) only means: look again.
          if (reason === 'released' || reason === 'released-here') released = true;
          recheck = true;
          wakeup.wake();
        },
        lease.operationTime,
      );
      const pollDelay = feed.streaming ? timing.safetyPollIntervalMs : pollDelayMs(round, timing);
      const nextProbeAt = Math.min(
        lease.sentAt + lease.remainingMs + LEASE_END_MARGIN_MS,
        performance.now() + pollDelay,
      );
      while (!recheck && performance.now() < nextProbeAt) {
        await wakeup.sleep(nextProbeAt - performance.now());
        signal.throwIfAborted();
      }
      if (released) return;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    unwatch?.();
  }
}
