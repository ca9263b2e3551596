/** Resolves on the event loop's next turn: after every promise continuation queued by then. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
