// The timers module's own functions: a test's fake timers (which replace the globals) must not
// hold back the library's commands.
import { setImmediate, setTimeout } from 'node:timers';

/** Resolves on the event loop's next turn: after every promise continuation queued by then. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Waits for `task` at most `ms` (it goes on afterwards): resolves `true` if it settled in time,
 * `false` if not. Never rejects: the task's owner handles its failure.
 */
export function settlesWithin(task: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    task.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, ms)))),
  ]).finally(() => clearTimeout(timer));
}

/** Resolves after `ms`; a background task's pause (`keepsAlive` false) does not keep the process running. */
export function sleep(ms: number, keepsAlive = true): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    if (!keepsAlive) timer.unref();
  });
}
