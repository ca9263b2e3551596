const { aborted: abortedProperty, reason: reasonProperty } = Object.getOwnPropertyDescriptors(
  AbortSignal.prototype,
);
const abortedOf = (signal: AbortSignal) => abortedProperty.get?.call(signal) as boolean;
const reasonOf = (signal: AbortSignal) => reasonProperty.get?.call(signal) as unknown;

/**
 * `signal`, made to run `check` at every look (`aborted`, `reason`, `throwIfAborted()`) so
 * `check` can abort it first: after a pause, a passed lease deadline aborts at the work's first
 * look, though the aborting timer may not have run (work due earlier runs first). Listeners
 * still hear the abort, from `check` or the timer.
 */
export function checkedAtEveryLook(signal: AbortSignal, check: () => void): AbortSignal {
  const checkedFirst =
    <T>(look: () => T) =>
    (): T => {
      check();
      return look();
    };
  Object.defineProperties(signal, {
    aborted: { get: checkedFirst(() => abortedOf(signal)) },
    reason: { get: checkedFirst(() => reasonOf(signal)) },
    throwIfAborted: {
      value: checkedFirst(() => {
        if (abortedOf(signal)) throw reasonOf(signal);
      }),
    },
  });
  return signal;
}
