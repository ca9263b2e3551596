import { performance } from 'node:perf_hooks';
import type { LockHandle } from '../../lib';
import type { SectionRecord } from '../faults/history/history';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { ContendArgs, ContendStats, HoldPlan } from './fault-protocol';

// Errors are told apart by `name`, not `instanceof`: the worker may run a copy of the library
// (FAULT_LIB_DIR, the mutation test), whose classes are not the ones `../../lib` would export.
function hasName(error: unknown, name: string): boolean {
  return error instanceof Error && error.name === name;
}

export function isLockLostError(error: unknown): boolean {
  return hasName(error, 'LockLostError');
}

/**
 * The handle's local lease deadline on the shared clock. Clock-skew scenarios shift `Date` in
 * some workers; `expiresAt` and `Date.now()` carry the same skew, so it cancels out here.
 */
export function sharedDeadline(handle: Pick<LockHandle, 'expiresAt'>): number {
  return sharedClockMs() + (handle.expiresAt.getTime() - Date.now());
}

/** When a handle's signal aborted, and its local deadline at that moment. */
export interface SignalWatch {
  signalAt: number | null;
  deadlineAtSignal: number | null;
}

/** Starts watching a handle's signal; call it as soon as `acquire` resolves. */
export function watchSignal(handle: LockHandle): SignalWatch {
  const watch: SignalWatch = { signalAt: null, deadlineAtSignal: null };
  const onAbort = () => {
    if (watch.signalAt !== null) return;
    watch.deadlineAtSignal = sharedDeadline(handle);
    watch.signalAt = sharedClockMs();
  };
  if (handle.signal.aborted) onAbort();
  else handle.signal.addEventListener('abort', onAbort, { once: true });
  return watch;
}

/** The deadline a section records: as it was when the signal aborted, or else as it is now. */
export function deadlineToRecord(handle: LockHandle, watch: SignalWatch): number {
  return watch.deadlineAtSignal ?? sharedDeadline(handle);
}

/** What the workers take locks from: a `LockService`, or engine v2's acquirer (its handles). */
export interface Contender {
  readonly holderId: string;
  acquire(
    key: string,
    options: { ttlMs: number; timeoutMs: number; renew: boolean },
  ): Promise<LockHandle>;
}

/**
 * Several logical workers in this process contend for a few keys until the plan's end.
 * Each critical section sleeps for a random hold (some longer than the lease) and stops early
 * when the handle's signal says the lease was lost, as a well-behaved user would.
 */
export async function runContention(
  service: Contender,
  args: ContendArgs,
  label: string,
  report: (section: SectionRecord) => void,
): Promise<ContendStats> {
  const stats: ContendStats = {
    sections: 0,
    lost: 0,
    timeouts: 0,
    unavailable: 0,
    maxSettleOvershootMs: -args.timeoutMs,
    errors: [],
    failedCalls: [],
  };
  let started = 0;
  const noteError = (error: unknown) => {
    if (stats.errors.length < 20) stats.errors.push(String(error));
  };
  const noteSettled = (calledAt: number) => {
    const overshootMs = performance.now() - calledAt - args.timeoutMs;
    stats.maxSettleOvershootMs = Math.max(stats.maxSettleOvershootMs, overshootMs);
  };
  const mayStart = () => sharedClockMs() < args.stopAt && started < args.maxSections;

  async function worker(index: number): Promise<void> {
    while (mayStart()) {
      started++;
      const key = args.keys[Math.floor(Math.random() * args.keys.length)];
      const renew = Math.random() < args.renewShare;
      const impatient = args.impatient && Math.random() < args.impatient.share;
      const calledAt = performance.now();
      const calledAtShared = sharedClockMs();
      let handle: LockHandle;
      try {
        handle = await service.acquire(key, {
          ttlMs: args.ttlMs,
          timeoutMs: impatient ? args.impatient!.timeoutMs : args.timeoutMs,
          renew,
        });
      } catch (error) {
        noteSettled(calledAt);
        stats.failedCalls?.push({ key, calledAt: calledAtShared, settledAt: sharedClockMs() });
        if (hasName(error, 'LockNotAcquiredError')) stats.timeouts++;
        else if (hasName(error, 'LockStoreUnavailableError')) stats.unavailable++;
        else noteError(error);
        continue;
      }
      noteSettled(calledAt);
      try {
        const section = await holdAndRelease(
          service,
          args.hold,
          handle,
          key,
          `${label}:w${index}`,
          noteError,
          args.retryUnconfirmedRelease ?? false,
        );
        report(section);
        stats.sections++;
        if (section.outcome === 'lost') stats.lost++;
      } catch (error) {
        noteError(error);
      }
    }
  }

  await Promise.all(Array.from({ length: args.workers }, (_, i) => worker(i)));
  return stats;
}

async function holdAndRelease(
  service: Contender,
  plan: HoldPlan,
  handle: LockHandle,
  key: string,
  worker: string,
  onError: (error: unknown) => void,
  retryUnconfirmedRelease: boolean,
): Promise<SectionRecord> {
  const watch = watchSignal(handle);
  const start = sharedClockMs();
  await sleepUnlessAborted(sampleHoldMs(plan), handle.signal);
  const end = sharedClockMs();
  let outcome: SectionRecord['outcome'] = handle.signal.aborted ? 'lost' : 'released';
  // Read just before release is sent (or kept from the abort): the deadline this section had.
  const deadline = deadlineToRecord(handle, watch);
  let releaseTries = 0;
  let releaseError: string | undefined;
  try {
    await releaseRetrying(handle, retryUnconfirmedRelease, () => releaseTries++);
  } catch (error) {
    releaseError = error instanceof Error ? error.name : String(error);
    // An unconfirmed release is given back in the background: the handle ends released once
    // MongoDB confirms it before the deadline, else the library tells it at its deadline
    // (signal). Anything else leaves the acquisition unaccounted for: the checker flags it.
    if (hasName(error, 'LockStoreUnavailableError')) {
      await waitForGiveBack(handle, handle.expiresAt.getTime() - Date.now() + 1_000);
      outcome = handle.signal.aborted ? 'lost' : handle.released ? 'released' : 'open';
    } else {
      outcome = isLockLostError(error) ? 'lost' : 'open';
    }
    if (outcome === 'open') onError(error);
  }
  return {
    key,
    fence: handle.fence.toString(),
    holder: service.holderId,
    worker,
    pid: process.pid,
    start,
    end,
    outcome,
    deadline,
    signalAt: watch.signalAt,
    ...(releaseTries > 1 ? { releaseTries } : {}),
    ...(releaseError === undefined ? {} : { releaseError }),
  };
}

/** Pause between tries of an unconfirmed release (`retryUnconfirmedRelease`). */
const RELEASE_RETRY_MS = 50;

/**
 * `release()`; with `retry`, tried again while MongoDB does not confirm it and the signal has
 * not aborted (a release is idempotent). Rejects with the last try's error.
 */
async function releaseRetrying(
  handle: LockHandle,
  retry: boolean,
  onTry: () => void,
): Promise<void> {
  for (;;) {
    onTry();
    let unconfirmed: unknown;
    try {
      await handle.release();
      return;
    } catch (error) {
      if (!retry || !hasName(error, 'LockStoreUnavailableError')) throw error;
      unconfirmed = error;
    }
    await sleepUnlessAborted(RELEASE_RETRY_MS, handle.signal);
    // The lease ran out meanwhile: handled as an unconfirmed release without retries.
    if (handle.signal.aborted) throw unconfirmed;
  }
}

function sampleHoldMs(plan: HoldPlan): number {
  if (Math.random() < plan.longShare) {
    return plan.longMinMs + Math.random() * (plan.longMaxMs - plan.longMinMs);
  }
  return Math.random() * plan.shortMaxMs;
}

function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}

/** Until the handle's background give-back is confirmed or its signal aborts, at most `timeoutMs`. */
async function waitForGiveBack(handle: LockHandle, timeoutMs: number): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!handle.released && !handle.signal.aborted && performance.now() < until) {
    await sleepUnlessAborted(Math.min(20, until - performance.now()), handle.signal);
  }
}
