// `npm run bench`: every comparison side by side in one run, on one server, so ratios hold
// on a noisy machine. Writes bench/results/latest.json, the SVG chart and BENCHMARKS.md.
import { startFaultServer } from '../test/support/fault-server';
import { variantNames, type VariantName } from './adapters/bench-lock';
import {
  spawnBenchWorkers,
  stopBenchWorkers,
  useVariant,
  type BenchWorker,
} from './support/bench-workers';
import { describeMachine } from './support/machine';
import { writeReports, type BenchResults, type VariantResult } from './support/report';
import { round, summarize, type LatencySummary } from './support/stats';
import { measureHandoff, measurePing } from './suites/handoff';
import { measureHttpOverhead } from './suites/http-overhead';
import { countRoundTrips } from './suites/round-trips';
import { measureScale } from './suites/scale';
import { measureThroughput } from './suites/throughput';

const settings = {
  processes: 4,
  workersPerProcess: 4,
  handoffSamples: Number(process.env.BENCH_HANDOFF_SAMPLES ?? 100),
  throughputMs: Number(process.env.BENCH_THROUGHPUT_MS ?? 5000),
  criticalSectionMs: 1,
  scaleKeys: 1000,
  waitersPerKey: 10,
};

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

async function runVariant(
  variant: VariantName,
  workers: BenchWorker[],
  pingP50: number,
): Promise<VariantResult> {
  await useVariant(workers, variant);
  const roundTrips = await timed(`${variant}: round trips`, () => countRoundTrips(workers[0]));
  const samples = await timed(`${variant}: hand-off`, () =>
    measureHandoff(workers[0], workers[1], { samples: settings.handoffSamples, warmup: 5 }),
  );
  const handoff = summarize(samples);
  log(`${variant}: hand-off p50 ${round(handoff.p50)} ms, p99 ${round(handoff.p99)} ms`);
  const throughput = await timed(`${variant}: throughput`, () =>
    measureThroughput(workers, {
      workersPerProcess: settings.workersPerProcess,
      durationMs: settings.throughputMs,
      criticalSectionMs: settings.criticalSectionMs,
    }),
  );
  log(`${variant}: ${throughput.sectionsPerSecond} critical sections/s`);
  return {
    variant,
    roundTrips,
    handoff: {
      ...handoff,
      ratioP50ToPing: round(handoff.p50 / pingP50),
      ratioP99ToPing: round(handoff.p99 / pingP50),
    },
    handoffSamples: samples.map((x) => round(x, 3)),
    throughput,
  };
}

async function timed<T>(what: string, work: () => Promise<T>): Promise<T> {
  const startedAt = Date.now();
  try {
    return await work();
  } finally {
    log(`${what} took ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
  }
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const server = await startFaultServer();
  log(`server ${server.kind} at ${server.uri}`);
  try {
    const workers = await timed('starting worker processes', () =>
      spawnBenchWorkers([...variantNames], settings.processes, {
        uri: server.uri,
        dbName: 'bench',
      }),
    );
    const variants: VariantResult[] = [];
    let ping: LatencySummary;
    let pingAtEnd: LatencySummary;
    try {
      // One ping reference for the whole run, from the same processes, before and after.
      ping = summarize(await measurePing(workers[1], 300));
      log(`ping p50 ${round(ping.p50, 3)} ms`);
      for (const variant of variantNames) {
        variants.push(await runVariant(variant, workers, ping.p50));
      }
      pingAtEnd = summarize(await measurePing(workers[1], 300));
    } finally {
      await stopBenchWorkers(workers);
    }
    const scale = await timed('scale', () =>
      measureScale(server.uri, settings.scaleKeys, settings.waitersPerKey),
    ).catch((error: unknown) => ({ error: String(error) }));
    log(`scale: ${JSON.stringify(scale)}`);
    const httpOverhead = await timed('http', () => measureHttpOverhead(server.uri)).catch(
      (error: unknown) => ({ error: String(error) }),
    );

    const results: BenchResults = {
      command: 'npm run bench',
      startedAt: startedAt.toISOString(),
      durationMs: Date.now() - startedAt.getTime(),
      machine: describeMachine(),
      server: { kind: server.kind, description: serverDescription(server.kind) },
      settings,
      ping,
      pingAtEnd,
      variants,
      scale,
      httpOverhead,
    };
    await writeReports(results);
    log(`done in ${Math.round(results.durationMs / 1000)} s`);
  } finally {
    await server.stop();
  }
}

function serverDescription(kind: string): string {
  return kind === 'uri'
    ? 'MONGODB_URI (a real deployment)'
    : 'offline MongoDB test server (test/mongo-offline, single-node replica set, own process)';
}

main().catch((error: unknown) => {
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
