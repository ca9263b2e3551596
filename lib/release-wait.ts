import type { LockEvent } from './interfaces/lock-state.interface';
import type { ResolvedLockModuleOptions } from './options';
import type { LineStorage } from './store/line/line-store';
import { isNamedPassingRefusal } from './store/mongo-error-codes';
import { settlesWithin, wakeUp } from './util/timers';
import type { LineWaiters } from './waiting/line-waiters';
import { LEASE_END_MARGIN_MS, pollDelayMs } from './waiting/wait-timing';

/** What a wait for a key's release uses of `LineLocks`. */
export interface ReleaseWatch {
  store: Pick<LineStorage, 'inspect'>;
  waiters: LineWaiters;
  options: Pick<
    ResolvedLockModuleOptions,
    'operationTimeoutMs' | 'safetyPollIntervalMs' | 'pollIntervalMs' | 'maxPollIntervalMs'
  >;
  /** Listens to every change on the collection until the returned function is called. */
  watchEvents(listener: (event: LockEvent) => void): () => void;
  /** The events stream's opening, while one is open (none with `changeStreams: 'off'`). */
  eventsOpened(): Promise<unknown> | undefined;
  /** Whether the change stream carries the lines' news (else waits poll). */
  streamOpen(): boolean;
}

/**
 * Resolves once `key` is free: looks again on each event of the key, on a lease cut short (the
 * waiters' `lookAgain`), when the last lease should end, and at the safety interval (or polls,
 * without change streams). Takes no lock. A look MongoDB cannot answer now (a step-down, a
 * stall) is made again on the poll's backoff, as a wait in line retries; other errors end it.
 */
export async function waitForRelease(
  key: string,
  signal: AbortSignal,
  from: ReleaseWatch,
): Promise<void> {
  let onEvent = () => {};
  const unwatch = from.watchEvents((event) => {
    if (event.key === key) onEvent();
  });
  try {
    // Opened before the first look, so that no release after it goes unheard.
    const opened = from.eventsOpened();
    if (opened) await settlesWithin(opened, from.options.operationTimeoutMs);
    for (let round = 0, failures = 0; ; round += 1) {
      signal.throwIfAborted();
      // Made before the look: news during it cuts the sleep after it short.
      const heard = new Promise<void>((resolve) => (onEvent = resolve));
      const nudge = from.waiters.nudged(key, from.waiters.stamp(key));
      try {
        let lookAt: number | undefined;
        try {
          lookAt = await nextLook(key, round, from);
          failures = 0;
        } catch (error) {
          // MongoDB away for now (an election, a stall) or a passing refusal (Interrupted): the
          // wait has no deadline to give up at. A read refused otherwise would be again.
          if (!isNamedPassingRefusal(error)) throw error;
          lookAt = performance.now() + pollDelayMs(failures, from.options);
          failures += 1;
        }
        if (lookAt === undefined) return;
        await wakeUp({ heard, nudged: nudge.nudged }, lookAt, signal);
      } finally {
        nudge.cancel();
      }
    }
  } finally {
    unwatch();
  }
}

/** Reads `key`: when to look again (its last lease's end, or a poll's); undefined if free. */
async function nextLook(
  key: string,
  round: number,
  from: ReleaseWatch,
): Promise<number | undefined> {
  const sentAt = performance.now();
  const state = await from.store.inspect(key);
  if (!state?.held) return undefined;
  const pollMs = from.streamOpen()
    ? from.options.safetyPollIntervalMs
    : pollDelayMs(round, from.options);
  return Math.min(sentAt + state.remainingMs + LEASE_END_MARGIN_MS, performance.now() + pollMs);
}
