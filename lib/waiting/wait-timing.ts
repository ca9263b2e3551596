/** How often the waiting layer tries again when no event tells it to. */
export interface WaitTiming {
  /** Re-try this often while a change stream watches the key. */
  safetyPollIntervalMs: number;
  /** First polling delay without change streams. */
  pollIntervalMs: number;
  /** Cap of the polling backoff. */
  maxPollIntervalMs: number;
}

/**
 * Added to a holder's remaining lease before re-trying: the lease was measured from before
 * our request was sent, so it can end a little after our countdown does.
 */
export const LEASE_END_MARGIN_MS = 5;

/**
 * Capped exponential backoff with "equal jitter": half the delay is fixed, half random, so
 * pollers spread out without ever polling faster than half the nominal rate.
 *
 * @example
 * pollDelayMs(3, { pollIntervalMs: 50, maxPollIntervalMs: 1000 }); // 200..400
 */
export function pollDelayMs(
  round: number,
  { pollIntervalMs, maxPollIntervalMs }: Pick<WaitTiming, 'pollIntervalMs' | 'maxPollIntervalMs'>,
  random: () => number = Math.random,
): number {
  const nominal = Math.min(maxPollIntervalMs, pollIntervalMs * 2 ** Math.min(round, 30));
  return nominal / 2 + (nominal / 2) * random();
}
