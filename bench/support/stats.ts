/** Summary of a latency sample, in milliseconds. */
export interface LatencySummary {
  count: number;
  min: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of an ascending array (`q` in 0..1). */
export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank];
}

export function summarize(samples: number[]): LatencySummary {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((total, x) => total + x, 0);
  return {
    count: sorted.length,
    min: sorted[0] ?? Number.NaN,
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p95: percentile(sorted, 0.95),
    p99: percentile(sorted, 0.99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mean: sorted.length ? sum / sorted.length : Number.NaN,
  };
}

export function round(value: number, digits = 2): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Samples above `thresholdMs`: stalls a percentile can hide. */
export function countAbove(samples: number[], thresholdMs: number): number {
  return samples.filter((x) => x > thresholdMs).length;
}

/**
 * The order variants run in at round `round`: rotated by one each round (A B C, B C A, ...),
 * so no variant always runs first or right after the same neighbour.
 */
export function rotated<T>(items: readonly T[], round: number): T[] {
  const shift = round % Math.max(1, items.length);
  return [...items.slice(shift), ...items.slice(0, shift)];
}

/** Commands per section, in all and by name, most frequent first: `4.1 (findAndModify 3.1, getMore 1.0)`. */
export function commandsPerSection(commands: Record<string, number>, sections: number): string {
  if (sections === 0) return '—';
  const total = Object.values(commands).reduce((sum, n) => sum + n, 0);
  const parts = Object.entries(commands)
    .sort((a, b) => b[1] - a[1])
    .map(([name, n]) => `${name} ${(n / sections).toFixed(1)}`);
  return `${(total / sections).toFixed(1)} (${parts.join(', ')})`;
}
