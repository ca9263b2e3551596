// The modes suite (`--suite=modes`): lock modes under load, several OS processes against one
// server, in one run:
//   1. shared against exclusive sections on one key (interleaved slices);
//   2. a writer amid a steady stream of readers: the writer's waits (bounded: readers that join
//      the key's line behind its entry wait for it), and what the readers keep doing meanwhile;
//   3. a semaphore of 4 permits: narrow holders (weight 1), holders at once never above 4, and a
//      wide request (weight 3) amid them, its waits.
// Each worker process has one LockService on its own client (bench/workers/mode-loops.ts).
// Writes bench/results/modes-latest.json and modes-latest.md, and prints the Markdown.
// Durations and sizes can be changed with BENCH_MODES_* variables (see `modesSettings`).
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { MongoClient } from 'mongodb';
import { LOCK_OPTION_DEFAULTS } from '../../lib/options';
import { holdingCount, liveEntries, type LineDocument } from '../../lib/store/line/line-document';
import { sharedClockMs } from '../../packages/process-harness/clock';
import { repoRoot } from '../support/bench-process';
import { startModeWorkers, stopWorkers, type BenchWorker } from '../support/bench-worker';
import { describeMachine } from '../support/machine';
import {
  commandsText,
  concurrency,
  exclusionViolations,
  mergePhases,
  roundSummary,
  summarizePhase,
  throughput,
  waits,
  type PhaseResult,
  type WaitSummary,
  type Window,
} from '../support/modes-analysis';
import { renderModesMarkdown } from '../support/modes-markdown';
import { summarize, type LatencySummary } from '../support/stats';
import type { SuiteContext } from '../support/suite';
import type { ModeLoopArgs, ModeLoopResult } from '../worker-protocol';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

export const modesSettings = {
  /** Processes of the steady stream (readers, narrow permit holders, the throughput loops). */
  processes: env('BENCH_MODES_PROCESSES', 4),
  workersPerProcess: env('BENCH_MODES_WORKERS', 4),
  holdMs: env('BENCH_MODES_HOLD_MS', 3),
  /** Shared against exclusive: interleaved slices per mode, and their length. */
  throughputSlices: env('BENCH_MODES_SLICES', 4),
  throughputSliceMs: env('BENCH_MODES_SLICE_MS', 4000),
  /** Readers alone first (their rate without a writer), then with the writer. */
  readersAloneMs: env('BENCH_MODES_READERS_ALONE_MS', 6000),
  writerPhaseMs: env('BENCH_MODES_WRITER_MS', 24_000),
  /** The writer (and the wide request) asks again after a random pause in this range. */
  requesterGapMinMs: 30,
  requesterGapMaxMs: 80,
  permits: 4,
  wideWeight: 3,
  narrowAloneMs: env('BENCH_MODES_NARROW_ALONE_MS', 6000),
  widePhaseMs: env('BENCH_MODES_WIDE_MS', 24_000),
  /** Waits of the stream give up after this; the writer's and the wide request's never do. */
  streamTimeoutMs: 30_000,
  requesterTimeoutMs: 120_000,
  ttlMs: 30_000,
};

export interface ModesResults {
  command: string;
  startedAt: string;
  durationMs: number;
  machine: ReturnType<typeof describeMachine> & { loadAverageAtStart: number[] };
  server: string;
  settings: typeof modesSettings;
  ping: { start: LatencySummary; end: LatencySummary };
  sharedVsExclusive: { shared: PhaseResult; exclusive: PhaseResult };
  writer: {
    readersAlone: PhaseResult;
    readersWithWriter: PhaseResult;
    writerWaits: WaitSummary;
    writerSections: number;
    writerFailures: number;
    writerErrors: string[];
    writerCommandsPerSection: string;
    /** Reader sections that overlapped a writer section (must be 0). */
    exclusion: { count: number; worstOverlapMs: number };
  };
  permits: {
    narrowAlone: PhaseResult;
    narrowWithWide: PhaseResult;
    wideWaits: WaitSummary;
    wideSections: number;
    wideFailures: number;
    wideErrors: string[];
    wideCommandsPerSection: string;
  };
  /** Live entries left in each key's line after its phase, holding and waiting (must be 0). */
  leftovers: Record<string, { liveHolders: number; liveWaiting: number }>;
  problems: string[];
}

type LoopSpec = Omit<ModeLoopArgs, 'startAt' | 'durationMs'>;

/**
 * Runs `specs` (one per child) from a common start in the near future for `durationMs`;
 * children without a spec stay idle.
 */
async function runTogether(
  runs: { child: BenchWorker; spec: LoopSpec }[],
  durationMs: number,
): Promise<{ window: Window; results: ModeLoopResult[] }> {
  const startAt = sharedClockMs() + 500;
  const results = await Promise.all(
    runs.map(({ child, spec }) => child.call('modeLoop', { ...spec, startAt, durationMs })),
  );
  return { window: { startAt, endAt: startAt + durationMs }, results };
}

async function measurePing(client: MongoClient, count: number): Promise<LatencySummary> {
  const admin = client.db('admin');
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await admin.command({ ping: 1 });
    samples.push(performance.now() - started);
  }
  return roundSummary(summarize(samples));
}

/** The key's live entries: a leave or a timed-out wait that left its entry behind shows here. */
async function leftoversOf(client: MongoClient, dbName: string, key: string) {
  const doc = await client
    .db(dbName)
    .collection<LineDocument>(`${LOCK_OPTION_DEFAULTS.collectionName}_line`)
    .findOne({ _id: key });
  // This process's clock for the server's: the leases are 30 s, far past any skew here.
  const live = liveEntries(doc?.line, new Date());
  const liveHolders = holdingCount(live, doc?.permits);
  return { liveHolders, liveWaiting: live.length - liveHolders };
}

export async function runModesSuite({
  server,
  command,
  startedAt,
  log,
}: SuiteContext): Promise<string[]> {
  const s = modesSettings;
  const loadAverageAtStart = describeMachine().loadAverage;
  const phase = (name: string, window: Window, results: ModeLoopResult[]): PhaseResult => {
    const result = summarizePhase(name, window, results);
    log(
      `${name}: ${result.stream.sectionsPerSecond} sections/s, ${result.stream.failures} failures, ` +
        `at most ${result.concurrency.maxHolders} holders at once, ` +
        `wait p50 ${result.stream.acquireWait.p50} ms, max ${result.stream.acquireWait.max} ms`,
    );
    return result;
  };
  const dbName = `bench_modes_${Date.now()}`;
  const reference = new MongoClient(server.uri);
  let stream: BenchWorker[] = [];
  let solo: BenchWorker[] = [];
  const problems: string[] = [];
  try {
    await reference.connect();
    [stream, solo] = await Promise.all([
      startModeWorkers(s.processes, 'stream', { uri: server.uri, dbName }),
      startModeWorkers(1, 'solo', { uri: server.uri, dbName }),
    ]);
    const pingStart = await measurePing(reference, 200);
    log(`ping p50 ${pingStart.p50} ms`);
    const loopOf = (key: string, options: LoopSpec['options']): LoopSpec => ({
      key,
      workers: s.workersPerProcess,
      options,
      holdMs: s.holdMs,
      gapMs: [0, 0],
      timeoutMs: s.streamTimeoutMs,
      ttlMs: s.ttlMs,
    });
    const requesterOf = (key: string, options: LoopSpec['options']): LoopSpec => ({
      key,
      workers: 1,
      options,
      holdMs: s.holdMs,
      gapMs: [s.requesterGapMinMs, s.requesterGapMaxMs],
      timeoutMs: s.requesterTimeoutMs,
      ttlMs: s.ttlMs,
      recordFirstReply: true,
    });
    const leftovers: ModesResults['leftovers'] = {};
    const checkLeftovers = async (key: string) => {
      leftovers[key] = await leftoversOf(reference, dbName, key);
      const left = leftovers[key];
      if (left.liveHolders || left.liveWaiting) {
        problems.push(`key ${key} after its phase: ${JSON.stringify(left)}`);
      }
    };

    // 1. Shared against exclusive, interleaved slices (S E, E S, ...).
    const slices: Record<
      'shared' | 'exclusive',
      { phases: PhaseResult[]; raw: ModeLoopResult[][] }
    > = { shared: { phases: [], raw: [] }, exclusive: { phases: [], raw: [] } };
    for (let r = 0; r < s.throughputSlices; r++) {
      const order: ('shared' | 'exclusive')[] =
        r % 2 === 0 ? ['shared', 'exclusive'] : ['exclusive', 'shared'];
      for (const mode of order) {
        const spec = loopOf(`modes:${mode}`, { mode });
        const { window, results } = await runTogether(
          stream.map((child) => ({ child, spec })),
          s.throughputSliceMs,
        );
        slices[mode].phases.push(phase(`${mode} slice ${r + 1}`, window, results));
        slices[mode].raw.push(results);
      }
    }
    const sharedVsExclusive = {
      shared: mergePhases('shared', slices.shared.phases, slices.shared.raw),
      exclusive: mergePhases('exclusive', slices.exclusive.phases, slices.exclusive.raw),
    };
    if (sharedVsExclusive.exclusive.concurrency.maxHolders > 1) {
      problems.push(
        `exclusive sections overlapped: ${sharedVsExclusive.exclusive.concurrency.maxHolders} at once`,
      );
    }
    await checkLeftovers('modes:shared');
    await checkLeftovers('modes:exclusive');

    // 2. A writer amid a steady stream of readers.
    const readerSpec = loopOf('modes:rw', { mode: 'shared' });
    const alone = await runTogether(
      stream.map((child) => ({ child, spec: readerSpec })),
      s.readersAloneMs,
    );
    const readersAlone = phase('readers alone', alone.window, alone.results);
    const withWriter = await runTogether(
      [
        ...stream.map((child) => ({ child, spec: readerSpec })),
        { child: solo[0], spec: requesterOf('modes:rw', { mode: 'exclusive' }) },
      ],
      s.writerPhaseMs,
    );
    const readerResults = withWriter.results.slice(0, stream.length);
    const writerResults = withWriter.results.slice(stream.length);
    const readersWithWriter = phase('readers with the writer', withWriter.window, readerResults);
    const writerWaits = waits(writerResults, readerResults, withWriter.window, {
      otherWeight: 1,
      roomLeft: 0,
    });
    const exclusion = exclusionViolations(writerResults, readerResults);
    if (exclusion.count > 0)
      problems.push(`readers overlapped the writer ${exclusion.count} times`);
    const writerStream = throughput(writerResults, withWriter.window);
    log(
      `writer: ${writerWaits.count} waits, p50 ${writerWaits.p50} ms, p95 ${writerWaits.p95} ms, ` +
        `max ${writerWaits.max} ms, over 1 s ${writerWaits.over1s}, ` +
        `overtakes per wait p50 ${writerWaits.overtakes.p50} max ${writerWaits.overtakes.max}`,
    );
    await checkLeftovers('modes:rw');

    // 3. A semaphore of `permits`: narrow holders alone, then with a wide request amid them.
    const narrowSpec = loopOf('modes:semaphore', { permits: s.permits });
    const narrow = await runTogether(
      stream.map((child) => ({ child, spec: narrowSpec })),
      s.narrowAloneMs,
    );
    const narrowAlone = phase('narrow permits alone', narrow.window, narrow.results);
    const withWide = await runTogether(
      [
        ...stream.map((child) => ({ child, spec: narrowSpec })),
        {
          child: solo[0],
          spec: requesterOf('modes:semaphore', { permits: s.permits, weight: s.wideWeight }),
        },
      ],
      s.widePhaseMs,
    );
    const narrowResults = withWide.results.slice(0, stream.length);
    const wideResults = withWide.results.slice(stream.length);
    const narrowWithWide = phase(
      'narrow permits with the wide request',
      withWide.window,
      narrowResults,
    );
    // Permits at once count the wide holder's weight too.
    narrowWithWide.concurrency = concurrency([
      { results: narrowResults, weight: 1 },
      { results: wideResults, weight: s.wideWeight },
    ]);
    const wideWaits = waits(wideResults, narrowResults, withWide.window, {
      otherWeight: 1,
      roomLeft: s.permits - s.wideWeight,
    });
    const wideStream = throughput(wideResults, withWide.window);
    log(
      `wide request: ${wideWaits.count} waits, p50 ${wideWaits.p50} ms, max ${wideWaits.max} ms, ` +
        `permits at once at most ${narrowWithWide.concurrency.maxWeight}`,
    );
    for (const p of [narrowAlone, narrowWithWide]) {
      if (p.concurrency.maxWeight > s.permits) {
        problems.push(
          `${p.name}: ${p.concurrency.maxWeight} permits held at once (of ${s.permits})`,
        );
      }
    }
    await checkLeftovers('modes:semaphore');

    for (const [what, count] of [
      [
        'shared/exclusive failures',
        sharedVsExclusive.shared.stream.failures + sharedVsExclusive.exclusive.stream.failures,
      ],
      ['reader failures', readersAlone.stream.failures + readersWithWriter.stream.failures],
      ['writer failures', writerStream.failures],
      ['narrow permit failures', narrowAlone.stream.failures + narrowWithWide.stream.failures],
      ['wide request failures', wideStream.failures],
      ['writer waits over 1 s', writerWaits.over1s],
      ['wide waits over 1 s', wideWaits.over1s],
    ] as const) {
      if (count > 0) problems.push(`${what}: ${count}`);
    }

    const pingEnd = await measurePing(reference, 200);
    const results: ModesResults = {
      command,
      startedAt: startedAt.toISOString(),
      durationMs: Date.now() - startedAt.getTime(),
      machine: { ...describeMachine(), loadAverageAtStart },
      server:
        server.kind === 'uri'
          ? 'MONGODB_URI (a real deployment)'
          : 'offline MongoDB test server (packages/mongo-offline, own process)',
      settings: s,
      ping: { start: pingStart, end: pingEnd },
      sharedVsExclusive,
      writer: {
        readersAlone,
        readersWithWriter,
        writerWaits,
        writerSections: writerStream.sections,
        writerFailures: writerStream.failures,
        writerErrors: writerStream.errors,
        writerCommandsPerSection: commandsText(writerStream),
        exclusion,
      },
      permits: {
        narrowAlone,
        narrowWithWide,
        wideWaits,
        wideSections: wideStream.sections,
        wideFailures: wideStream.failures,
        wideErrors: wideStream.errors,
        wideCommandsPerSection: commandsText(wideStream),
      },
      leftovers,
      problems,
    };
    const dir = path.join(repoRoot, 'bench/results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'modes-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
    const markdown = renderModesMarkdown(results);
    writeFileSync(path.join(dir, 'modes-latest.md'), markdown);
    console.log(markdown);
    if (problems.length) log(`PROBLEMS: ${problems.join('; ')}`);
    return problems;
  } finally {
    await stopWorkers([...stream, ...solo]);
    await reference.close();
  }
}
