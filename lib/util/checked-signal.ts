const { aborted: abortedProperty, reason: reasonProperty } = Object.getOwnPropertyDescriptors(
  AbortSignal.prototype,
);
const abortedOf = (signal: AbortSignal) => abortedProperty.get?.call(signal) as boolean;
const reasonOf = (signal: AbortSignal) => reasonProperty.get?.call(signal) as unknown;

/**
 * `signal`, made to run `check` at every look (`aborted`, `reason`, `throwIfAborted()`), so
 * that `check` can abort it first. A lease's deadline that passed while the process was paused
 * then aborts a signal kept by the work at its first look after the pause: the timer that
 * aborts it may not have run yet (timers fire in the order they were due, so work due earlier
 * runs first). Listeners still hear the abort when `check` or the timer aborts it.
 */
export function checkedAtEveryLook(signal: AbortSignal, check: () => void): AbortSignal {
  Object.defineProperties(signal, {
    aborted: {
      get: () => {
        check();
        return abortedOf(signal);
      },
    },
    reason: {
      get: () => {
        check();
        return reasonOf(signal);
      },
    },
    throwIfAborted: {
      value: () => {
        check();
        if (abortedOf(signal)) throw reasonOf(signal);
      },
    },
  });
  return signal;
}
