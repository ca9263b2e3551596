/**
 * Added to a holder's remaining lease before re-trying: our countdown starts when the request
 * is sent, before the server measures the lease, so the lease can end a little after it.
 */
export const LEASE_END_MARGIN_MS = 5;

/**
 * Capped exponential backoff with "equal jitter": half the delay fixed, half random, so
 * pollers spread out but never wait less than half the nominal delay.
 *
 * @example
 * pollDelayMs(3, { pollIntervalMs: 50, maxPollIntervalMs: 1000 }); // 200..400
 */
export function pollDelayMs(
  round: number,
  { pollIntervalMs, maxPollIntervalMs }: { pollIntervalMs: number; maxPollIntervalMs: number },
  random: () => number = Math.random,
): number {
  const nominal = Math.min(maxPollIntervalMs, pollIntervalMs * 2 ** Math.min(round, 30));
  return nominal / 2 + (nominal / 2) * random();
}
