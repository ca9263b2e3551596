// The timers module's own function: a test's fake timers (which replace the global one) must
// not hold back the library's commands.
import { setImmediate } from 'node:timers';

/** Resolves on the event loop's next turn: after every promise continuation queued by then. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
