// The main suite, what `npm run bench` runs by default: every comparison side by side in one
// run, on one server, so ratios hold on a noisy machine. The variants take turns (interleaved,
// repeated rounds) so that load on the machine falls on all of them alike. Then the shape
// matrix, command sizes, waiting at scale and the decorator's HTTP overhead. Writes
// bench/results/latest.json, latest.md and the SVG chart. The BENCH_* variables below shorten
// it (BENCH_SHAPES=2x1 for one shape of the matrix).
import { comparedVariants, variantNames, type VariantName } from '../adapters/bench-lock';
import { startVariantWorkers, stopWorkers, useVariant } from '../support/bench-worker';
import { describeMachine } from '../support/machine';
import { writeReports, type BenchResults, type VariantResult } from '../support/report';
import { countAbove, rotated, round, summarize } from '../support/stats';
import type { SuiteContext } from '../support/suite';
import { measureCommandSizes } from './command-sizes';
import { measureContention, parseShapes } from './contention';
import { measureEventFloor, measureHandoff, measurePing, measurePingAfterIdle } from './handoff';
import { measureHttpOverhead } from './http-overhead';
import { countRoundTrips, type RoundTripResult } from './round-trips';
import { measureScale } from './scale';
import { combineThroughput, measureThroughput, type ThroughputResult } from './throughput';

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
  contentionRounds: env('BENCH_CONTENTION_ROUNDS', 4),
  contentionSliceMs: env('BENCH_CONTENTION_SLICE_MS', 1500),
  scaleKeys: 1000,
  waitersPerKey: 10,
};

/** Every variant that runs in the shape matrix (BENCH_CONTENTION_VARIANTS). */
function contentionVariants(): VariantName[] {
  return (process.env.BENCH_CONTENTION_VARIANTS ?? 'ours,ours-local-off,mongodash')
    .split(',')
    .filter((v): v is VariantName => (variantNames as readonly string[]).includes(v));
}

async function timed<T>(log: (message: string) => void, what: string, work: () => Promise<T>) {
  const startedAt = Date.now();
  try {
    return await work();
  } finally {
    log(`${what} took ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
  }
}

export async function runMainSuite({
  server,
  command,
  startedAt,
  log,
}: SuiteContext): Promise<string[]> {
  /** The shape matrix: P processes × W callers per process on one key (BENCH_SHAPES). */
  const shapes = parseShapes(process.env.BENCH_SHAPES ?? '2x1,1x2,2x2,4x1,4x4,8x1');
  const loadAtStart = describeMachine().loadAverage;
  const variants = [...comparedVariants];
  const workers = await timed(log, 'starting worker processes', () =>
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
    await timed(log, 'hand-off, interleaved', async () => {
      for (let r = 0; r < settings.rounds; r++) {
        pingSamples.push(...(await measurePing(workers[1], settings.pingsPerRound)));
        for (const worker of workers.slice(0, 2)) {
          idlePingSamples.push(...(await measurePingAfterIdle(worker, settings.idlePingsPerRound)));
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
    await timed(log, 'throughput, interleaved', async () => {
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

  const contention = await timed(log, 'shape matrix', () =>
    measureContention(
      server.uri,
      {
        shapes,
        variants: contentionVariants(),
        criticalSectionMs: settings.criticalSectionMs,
        rounds: settings.contentionRounds,
        sliceMs: settings.contentionSliceMs,
        warmupMs: settings.warmupMs,
        serverPid: server.pid,
      },
      log,
    ),
  ).catch((error: unknown) => ({ error: String(error) }));
  const commandSizes = await timed(log, 'command sizes', () =>
    measureCommandSizes(server.uri),
  ).catch((error: unknown) => ({ error: String(error) }));

  const scale = await timed(log, 'scale', () =>
    measureScale(server.uri, settings.scaleKeys, settings.waitersPerKey),
  ).catch((error: unknown) => ({ error: String(error) }));
  log(`scale: ${JSON.stringify(scale)}`);
  const httpOverhead = await timed(log, 'http', () => measureHttpOverhead(server.uri)).catch(
    (error: unknown) => ({ error: String(error) }),
  );

  const results: BenchResults = {
    command,
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
  return [];
}

function serverDescription(kind: string): string {
  return kind === 'uri'
    ? 'MONGODB_URI (a real deployment)'
    : 'offline MongoDB test server (packages/mongo-offline, single-node replica set, own process)';
}
