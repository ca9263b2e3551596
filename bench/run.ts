// `npm run bench`: every comparison side by side in one run, on one server, so ratios hold
// on a noisy machine. The variants take turns (interleaved, repeated rounds) so that load on
// the machine falls on all of them alike. Compiled to .bench-build/ first (tsconfig.bench.json)
// and run with plain node. Writes bench/results/latest.json, latest.md and the SVG chart.
import { comparedVariants, variantNames, type VariantName } from './adapters/bench-lock';
import { startBenchServer } from './support/bench-process';
import { startVariantWorkers, stopWorkers, useVariant } from './support/bench-worker';
import { describeMachine } from './support/machine';
import { writeReports, type BenchResults, type VariantResult } from './support/report';
import { countAbove, rotated, round, summarize } from './support/stats';
import { measureCommandSizes } from './suites/command-sizes';
import { measureContention, parseShapes } from './suites/contention';
import {
  measureEventFloor,
  measureHandoff,
  measurePing,
  measurePingAfterIdle,
} from './suites/handoff';
import { measureHttpOverhead } from './suites/http-overhead';
import { countRoundTrips, type RoundTripResult } from './suites/round-trips';
import { measureScale } from './suites/scale';
import { combineThroughput, measureThroughput, type ThroughputResult } from './suites/throughput';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

const settings = {
  processes: 4,
  workersPerProcess: 4,
  /** Hand-off samples per variant, over `rounds` interleaved rounds. */
  handoffSamples: env('BENCH_HANDOFF_SAMPLES', 500),
  rounds: env('BENCH_ROUNDS', 10),
  /** Pings per round, interleaved with the hand-offs: the reference round trip. */
  pingsPerRound: 50,
  /** Pings per round after an idle wait as long as a hand-off's, from each of the two workers. */
  idlePingsPerRound: 15,
  /** Change events per round between the two hand-off processes (`measureEventFloor`). */
  eventFloorPerRound: 20,
  /** A hand-off slower than this counts as a stall. */
  stallMs: 50,
  /** Contended time per variant in total, split into interleaved slices. */
  throughputMs: env('BENCH_THROUGHPUT_MS', 8000),
  throughputSlices: env('BENCH_THROUGHPUT_SLICES', 4),
  criticalSectionMs: 1,
  /** Run at the start of every contended slice and not counted (`ContendArgs.warmupMs`). */
  warmupMs: env('BENCH_WARMUP_MS', 250),
  /** Shape matrix: rounds × slice per variant and shape (named as the scan it replaced). */
  contentionRounds: env('BENCH_CONTENTION_ROUNDS', 2),
  contentionSliceMs: env('BENCH_CONTENTION_SLICE_MS', 1500),
  scaleKeys: 1000,
  waitersPerKey: 10,
};

/** The shape matrix: P processes × W callers per process on one key (BENCH_SHAPES). */
const shapes = parseShapes(process.env.BENCH_SHAPES ?? '2x1,1x2,2x2,4x1,4x4,8x1');
const contentionVariants = (
  process.env.BENCH_CONTENTION_VARIANTS ?? 'ours,ours-local-off,ours-v2,mongodash'
)
  .split(',')
  .filter((v): v is VariantName => (variantNames as readonly string[]).includes(v));

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
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
  const loadAtStart = describeMachine().loadAverage;
  const server = await startBenchServer();
  log(`server ${server.kind} at ${server.uri}${server.pid ? ` (pid ${server.pid})` : ''}`);
  const variants = [...comparedVariants];
  try {
    const workers = await timed('starting worker processes', () =>
      startVariantWorkers(variants, settings.processes, { uri: server.uri, dbName: 'bench' }),
    );
    const roundTrips = new Map<VariantName, RoundTripResult>();
    const handoffSamples = new Map<VariantName, number[]>(variants.map((v) => [v, []]));
    const throughputSlices = new Map<VariantName, ThroughputResult[]>(variants.map((v) => [v, []]));
    const pingSamples: number[] = [];
    const idlePingSamples: number[] = [];
    const eventFloorSamples: number[] = [];
    let pingAtStart: number[];
    let pingAtEnd: number[];
    try {
      pingAtStart = await measurePing(workers[1], 300);
      for (const variant of variants) {
        await useVariant(workers, variant);
        roundTrips.set(variant, await countRoundTrips(workers[0]));
      }
      const perRound = Math.ceil(settings.handoffSamples / settings.rounds);
      await timed('hand-off, interleaved', async () => {
        for (let r = 0; r < settings.rounds; r++) {
          pingSamples.push(...(await measurePing(workers[1], settings.pingsPerRound)));
          for (const worker of workers.slice(0, 2)) {
            idlePingSamples.push(
              ...(await measurePingAfterIdle(worker, settings.idlePingsPerRound)),
            );
          }
          eventFloorSamples.push(
            ...(await measureEventFloor(workers[0], workers[1], settings.eventFloorPerRound)),
          );
          for (const variant of rotated(variants, r)) {
            await useVariant(workers, variant);
            const samples = await measureHandoff(workers[0], workers[1], {
              samples: perRound,
              warmup: r === 0 ? 5 : 2,
            });
            handoffSamples.get(variant)!.push(...samples);
          }
          log(`hand-off round ${r + 1}/${settings.rounds} done`);
        }
      });
      const sliceMs = settings.throughputMs / settings.throughputSlices;
      await timed('throughput, interleaved', async () => {
        for (let r = 0; r < settings.throughputSlices; r++) {
          for (const variant of rotated(variants, r)) {
            await useVariant(workers, variant);
            throughputSlices.get(variant)!.push(
              await measureThroughput(workers, {
                workersPerProcess: settings.workersPerProcess,
                warmupMs: settings.warmupMs,
                durationMs: sliceMs,
                criticalSectionMs: settings.criticalSectionMs,
                serverPid: server.pid,
              }),
            );
          }
        }
      });
      pingAtEnd = await measurePing(workers[1], 300);
    } finally {
      await stopWorkers(workers);
    }

    const ping = summarize(pingSamples);
    const pingAfterIdle = summarize(idlePingSamples);
    const eventFloor = summarize(eventFloorSamples);
    log(
      `ping p50 ${round(ping.p50, 3)} ms (${ping.count} samples, interleaved); ` +
        `after an idle wait ${round(pingAfterIdle.p50, 3)} ms (${pingAfterIdle.count}); ` +
        `change-event floor ${round(eventFloor.p50, 3)} ms (${eventFloor.count})`,
    );
    const variantResults: VariantResult[] = variants.map((variant) => {
      const samples = handoffSamples.get(variant)!;
      const handoff = summarize(samples);
      const throughput = combineThroughput(throughputSlices.get(variant)!);
      log(
        `${variant}: hand-off p50 ${round(handoff.p50)} ms (${round(handoff.p50 / ping.p50)} pings, ` +
          `${round(handoff.p50 / pingAfterIdle.p50)} pings after idle), ` +
          `p95 ${round(handoff.p95)}, p99 ${round(handoff.p99)}, ` +
          `stalls > ${settings.stallMs} ms ${countAbove(samples, settings.stallMs)}; ` +
          `${throughput.sectionsPerSecond} sections/s, ${throughput.commandsPerSection} commands/section, ` +
          `${throughput.cpuPerSection.total} CPU µs/section`,
      );
      return {
        variant,
        roundTrips: roundTrips.get(variant)!,
        handoff: {
          ...handoff,
          ratioP50ToPing: round(handoff.p50 / ping.p50),
          ratioP99ToPing: round(handoff.p99 / ping.p50),
          ratioP50ToPingAfterIdle: round(handoff.p50 / pingAfterIdle.p50),
          ratioP50ToEventFloor: round(handoff.p50 / eventFloor.p50),
          ratioP99ToEventFloor: round(handoff.p99 / eventFloor.p99),
          stallsOverMs: settings.stallMs,
          stalls: countAbove(samples, settings.stallMs),
        },
        handoffSamples: samples.map((x) => round(x, 3)),
        throughput,
      };
    });

    const contention = await timed('shape matrix', () =>
      measureContention(
        server.uri,
        {
          shapes,
          variants: contentionVariants,
          criticalSectionMs: settings.criticalSectionMs,
          rounds: settings.contentionRounds,
          sliceMs: settings.contentionSliceMs,
          warmupMs: settings.warmupMs,
          serverPid: server.pid,
        },
        log,
      ),
    ).catch((error: unknown) => ({ error: String(error) }));
    const commandSizes = await timed('command sizes', () => measureCommandSizes(server.uri)).catch(
      (error: unknown) => ({ error: String(error) }),
    );

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
      machine: { ...describeMachine(), loadAverageAtStart: loadAtStart },
      server: {
        kind: server.kind,
        description: serverDescription(server.kind),
        cpuCounted: server.pid !== undefined,
      },
      settings,
      ping,
      pingAfterIdle,
      eventFloor,
      pingAtStart: summarize(pingAtStart),
      pingAtEnd: summarize(pingAtEnd),
      variants: variantResults,
      contention,
      commandSizes,
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
    : 'offline MongoDB test server (packages/mongo-offline, single-node replica set, own process)';
}

main().catch((error: unknown) => {
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
