import { mkdir, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { VariantName } from '../adapters/bench-lock';
import type { CommandSizesResult } from '../suites/command-sizes';
import type { ContentionRow } from '../suites/contention';
import type { HttpOverheadResult } from '../suites/http-overhead';
import type { RoundTripResult } from '../suites/round-trips';
import type { ThroughputResult } from '../suites/throughput';
import type { ScaleResult } from '../worker-protocol';
import type { MachineInfo } from './machine';
import { repoRoot } from './bench-process';
import { renderMarkdown } from './report-markdown';
import type { LatencySummary } from './stats';
import { renderCdfChart } from './svg-chart';

export interface VariantResult {
  variant: VariantName;
  roundTrips: RoundTripResult;
  handoff: LatencySummary & {
    ratioP50ToPing: number;
    ratioP99ToPing: number;
    /** p50 over the p50 of pings sent after the same idle wait (`pingAfterIdle`). */
    ratioP50ToPingAfterIdle: number;
    /** p50 over the p50 of the change-event floor (`eventFloor`). */
    ratioP50ToEventFloor?: number;
    /** p99 over the p99 of the change-event floor. */
    ratioP99ToEventFloor?: number;
    /** Hand-offs slower than `stallsOverMs`. */
    stalls: number;
    stallsOverMs: number;
  };
  handoffSamples: number[];
  throughput: ThroughputResult;
}

export interface BenchResults {
  command: string;
  startedAt: string;
  durationMs: number;
  machine: MachineInfo & { loadAverageAtStart: number[] };
  /** `cpuCounted`: the server is our process, so its CPU time is in the per-section figures. */
  server: { kind: string; description: string; cpuCounted: boolean };
  settings: Record<string, number>;
  /** The reference round trip every latency is divided by, measured between the hand-off rounds. */
  ping: LatencySummary;
  /** Pings each sent after an idle wait drawn as a hand-off's: the reference matched to it. */
  pingAfterIdle: LatencySummary;
  /**
   * One small majority update and its change event between the two hand-off processes, after
   * the same idle wait: the floor of any hand-off that travels by a change stream here.
   */
  eventFloor?: LatencySummary;
  /** The same, before and after the variants: a check that the machine stayed steady. */
  pingAtStart: LatencySummary;
  pingAtEnd: LatencySummary;
  variants: VariantResult[];
  /** Shape matrix: P processes × W callers on one key, each variant per shape. */
  contention: ContentionRow[] | { error: string };
  /** The largest command of each kind, per lock type, and the lock document after a hand-off. */
  commandSizes: CommandSizesResult | { error: string };
  scale: ScaleResult | { error: string };
  httpOverhead: HttpOverheadResult | { error: string };
}

const resultsDir = path.join(repoRoot, 'bench/results');

export const variantLabels: Record<VariantName, string> = {
  ours: 'nestjs-mongo-lock (change stream)',
  'ours-poll-10ms': 'nestjs-mongo-lock, polling 10 ms',
  'ours-poll-100ms': 'nestjs-mongo-lock, polling 100 ms',
  mongodash: 'mongodash withLock (defaults)',
  'ours-local-off': 'nestjs-mongo-lock, localHandOff false',
};

export async function writeReports(results: BenchResults): Promise<void> {
  await mkdir(resultsDir, { recursive: true });
  await writeFile(path.join(resultsDir, 'latest.json'), JSON.stringify(results, null, 2) + '\n');
  const chart = renderCdfChart(
    results.variants.map((v) => ({ name: variantLabels[v.variant], samples: v.handoffSamples })),
    {
      title: 'Hand-off latency between processes (release → waiter acquired)',
      reference: { label: `ping p50 ${results.ping.p50.toFixed(2)} ms`, valueMs: results.ping.p50 },
    },
  );
  await writeFile(path.join(resultsDir, 'handoff-latency.svg'), chart);
  // BENCHMARKS.md is the maintainer's: the run writes its rendering next to the JSON.
  await writeFile(path.join(resultsDir, 'latest.md'), renderMarkdown(results));
}
