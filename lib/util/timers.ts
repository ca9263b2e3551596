// The timers module's own functions: a test's fake timers replace the globals and must not hold
// back the library's commands. Waits and lease deadlines (`wakeUp`, `unrefTimer`) also follow
// the global timers: a test that advances fake time past a lease or a `timeoutMs` sees it end.
import { performance as nodePerformance } from 'node:perf_hooks';
import { clearTimeout, setTimeout } from 'node:timers';

/** Largest delay `setTimeout` accepts (2^31 - 1 ms, about 24.8 days): longer ones fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Waits at most `ms` for `task` (which goes on): `true` if it settled in time. Never rejects. */
export function settlesWithin(task: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const delayMs = Math.min(Math.max(0, ms), MAX_TIMER_MS);
  return Promise.race([
    task.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), delayMs))),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Runs `callback` after `delayMs` (clamped to 0..{@link MAX_TIMER_MS}) without keeping the process
 * alive; returns what cancels it. On the global timers when a test's fake timers fake the clock
 * too (Jest's modern ones): fake time drives leases. Fake timers that leave the clock real
 * (Jest's legacy ones) would never fire for a lease that runs on it: the real timers then.
 */
export function unrefTimer(callback: () => void, delayMs: number): () => void {
  const clockFaked = globalThis.performance.now !== nodePerformance.now;
  const [schedule, clear] = clockFaked
    ? [globalThis.setTimeout, globalThis.clearTimeout]
    : [setTimeout, clearTimeout];
  const timer = schedule(callback, Math.max(0, Math.min(delayMs, MAX_TIMER_MS))).unref();
  return () => clear(timer);
}

/** Resolves after `ms`; unless `keepsAlive`, its timer does not keep the process running. */
export function sleep(ms: number, keepsAlive = true): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    if (!keepsAlive) timer.unref();
  });
}

/** Why {@link wakeUp} settled. */
export type WakeReason = 'heard' | 'nudged' | 'timer' | 'aborted';

/**
 * Settles at monotonic time `until` ('timer'), on abort ('aborted'), or when one of `news`
 * settles first. Never 'timer' early: a timer counts from the loop's cached time, so it can fire
 * a millisecond before `until`, and a wait woken early would send a needless renewal.
 *
 * A wait (`fakeable`) also arms the global timer when a test's fake timers replace it, whichever
 * clock they fake: modern ones move `performance.now()` too, so advancing them ends the wait;
 * legacy ones do not, and the real timer ends it. A command's deadline stays on real time.
 */
export async function wakeUp(
  news: Partial<Record<'heard' | 'nudged', Promise<unknown>>>,
  until: number,
  signal: AbortSignal | undefined,
  fakeable = true,
): Promise<WakeReason> {
  const timers: NodeJS.Timeout[] = [];
  let onAbort: (() => void) | undefined;
  const ended = new Promise<'timer' | 'aborted'>((resolve) => {
    if (signal?.aborted) return resolve('aborted');
    const arm = (schedule: typeof setTimeout) => {
      const leftMs = until - performance.now();
      if (leftMs <= 0) return resolve('timer');
      // A longer delay would fire at once: the timer is armed again when it fires.
      const delayMs = Math.min(Math.ceil(leftMs), MAX_TIMER_MS);
      timers.push(schedule(() => arm(schedule), delayMs));
    };
    arm(setTimeout);
    if (fakeable && globalThis.setTimeout !== setTimeout) arm(globalThis.setTimeout);
    onAbort = () => resolve('aborted');
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([
      ended,
      ...Object.entries(news).map(([reason, promise]) => promise.then(() => reason as WakeReason)),
    ]);
  } finally {
    // Each clears its own kind: a real timer's id means nothing to fake timers, and back.
    for (const timer of timers) {
      clearTimeout(timer);
      globalThis.clearTimeout(timer);
    }
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * Calls `callback` at monotonic time `until`, on a wait's timers ({@link wakeUp}): under fake
 * timers, whichever clock they fake. Returns what cancels it.
 */
export function callAt(until: number, callback: () => void): () => void {
  const cancel = new AbortController();
  void wakeUp({}, until, cancel.signal).then((woke) => woke === 'timer' && callback());
  return () => cancel.abort();
}

/**
 * `task`'s result, or `late()` thrown at monotonic time `until`, or the signal's reason if it
 * aborts first (the task goes on; its failure after that is ignored).
 */
export async function settledBy<T>(
  task: Promise<T>,
  until: number,
  signal: AbortSignal | undefined,
  late: () => Error,
): Promise<T> {
  task.catch(() => undefined);
  const woke = await wakeUp({ heard: task.then(() => undefined) }, until, signal, false);
  if (woke === 'timer') throw late();
  if (woke === 'aborted') throw signal?.reason;
  return task;
}

/**
 * `command`, tried again after a pause (50 ms, doubling up to 1 s) while its failure is
 * `passing` and time is left before monotonic time `until`, unless `signal` aborted.
 */
export async function retriedUntil<T>(
  command: () => Promise<T>,
  passing: (error: unknown) => boolean,
  until: number,
  signal?: AbortSignal,
): Promise<T> {
  for (let delayMs = 50; ; delayMs = Math.min(delayMs * 2, 1_000)) {
    try {
      return await command();
    } catch (error) {
      if (!passing(error) || signal?.aborted || performance.now() + delayMs >= until) throw error;
      await sleep(delayMs, false);
      // Aborted during the pause: no further try goes out.
      if (signal?.aborted) throw error;
    }
  }
}

/**
 * A deadline armed around steps of a task, and disarmed between them: once one passes, `passed`
 * rejects with the error its arming named, and `expired` is true. On real time, as a command's.
 */
export class StepDeadline {
  expired = false;
  readonly passed: Promise<never>;
  private timer: NodeJS.Timeout | undefined;
  private fail!: (error: unknown) => void;

  constructor() {
    this.passed = new Promise<never>((_, reject) => (this.fail = reject));
    this.passed.catch(() => undefined);
  }

  arm(ms: number, error: () => unknown): void {
    this.disarm();
    const fire = () => {
      this.expired = true;
      this.fail(error());
    };
    this.timer = setTimeout(fire, Math.min(Math.max(0, ms), MAX_TIMER_MS));
  }

  disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
