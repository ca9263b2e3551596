/**
 * A duration as messages print it: whole milliseconds (`4999 ms`, never
 * `4999.029018000001 ms`). Deadlines are computed from `performance.now()`, so the durations
 * that reach a message are rarely whole.
 *
 * @example
 * `within ${formatMs(4999.029018000001)}`; // 'within 4999 ms'
 */
export function formatMs(ms: number): string {
  return `${Math.round(ms)} ms`;
}
