/**
 * A duration as messages print it, in whole ms (`performance.now()` durations rarely are).
 *
 * @example
 * `within ${formatMs(4999.029018000001)}`; // 'within 4999 ms'
 */
export function formatMs(ms: number): string {
  return `${Math.round(ms)} ms`;
}
