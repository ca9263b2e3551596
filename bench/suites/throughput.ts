import { sharedClockMs } from '../../packages/process-harness/clock';
import { processCpuMicros } from '../support/bench-process';
import type { BenchWorker } from '../support/bench-worker';
import { sleep } from '../support/stats';

export interface ThroughputOptions {
  workersPerProcess: number;
  /** Run before the counted window and not counted (`ContendArgs.warmupMs`). */
  warmupMs: number;
  /** The counted window. */
  durationMs: number;
  criticalSectionMs: number;
  /** The server's pid when it runs on this machine as our process: its CPU is counted too. */
  serverPid?: number;
  key?: string;
}

export interface ThroughputResult {
  processes: number;
  workersPerProcess: number;
  /** Measured time in total (over every slice). */
  durationMs: number;
  /** How many interleaved slices the time was split into. */
  slices: number;
  sections: number;
  failures: number;
  sectionsPerSecond: number;
  /** Sections completed by each process: a lock that stays in one process is fast but unfair. */
  sectionsByProcess: number[];
  /** The busiest process's sections over the least busy one's: 1 is fair; null if one did none. */
  shareMaxOverMin: number | null;
  /** Commands all processes sent during the run, by name. */
  commands: Record<string, number>;
  commandsPerSection: number;
  /** CPU time (user + system) of the worker processes, and of the server if ours, in µs. */
  cpu: { workersMicros: number; serverMicros: number | null };
  /** CPU µs per critical section: workers, server (null when not ours), total. */
  cpuPerSection: { workers: number; server: number | null; total: number };
}

/** One slice: every worker of every process loops acquire → short critical section → release. */
export async function measureThroughput(
  processes: BenchWorker[],
  options: ThroughputOptions,
): Promise<ThroughputResult> {
  // A common start time in the near future, so no process gets a head start alone.
  const startAt = sharedClockMs() + 500;
  const countFrom = startAt + options.warmupMs;
  const running = Promise.all(
    processes.map((worker) =>
      worker.call('contend', {
        key: options.key ?? 'throughput',
        workers: options.workersPerProcess,
        startAt,
        warmupMs: options.warmupMs,
        durationMs: options.durationMs,
        criticalSectionMs: options.criticalSectionMs,
        // mongodash's default wait; the same for every variant.
        timeoutMs: 3000,
      }),
    ),
  );
  // Awaited below: a worker that dies meanwhile must fail the slice, not the process.
  running.catch(() => undefined);
  // The server's CPU over the workers' counted window.
  await sleep(Math.max(0, countFrom - sharedClockMs()));
  const serverBefore = processCpuMicros(options.serverPid);
  await sleep(Math.max(0, countFrom + options.durationMs - sharedClockMs()));
  const serverAfter = processCpuMicros(options.serverPid);
  const results = await running;
  const sections = results.reduce((total, r) => total + r.sections, 0);
  const commands: Record<string, number> = {};
  for (const r of results) {
    for (const [name, n] of Object.entries(r.commands)) commands[name] = (commands[name] ?? 0) + n;
  }
  return summarizeThroughput(
    [
      {
        durationMs: options.durationMs,
        sectionsByProcess: results.map((r) => r.sections),
        failures: results.reduce((total, r) => total + r.failures, 0),
        commands,
        workersMicros: results.reduce((total, r) => total + r.cpuMicros, 0),
        serverMicros:
          serverBefore === undefined || serverAfter === undefined
            ? null
            : serverAfter - serverBefore,
      },
    ],
    options.workersPerProcess,
    sections,
  );
}

interface Slice {
  durationMs: number;
  sectionsByProcess: number[];
  failures: number;
  commands: Record<string, number>;
  workersMicros: number;
  serverMicros: number | null;
}

/** Several slices of the same variant (interleaved with others) added up into one result. */
export function combineThroughput(slices: ThroughputResult[]): ThroughputResult {
  const parts: Slice[] = slices.map((s) => ({
    durationMs: s.durationMs,
    sectionsByProcess: s.sectionsByProcess,
    failures: s.failures,
    commands: s.commands,
    workersMicros: s.cpu.workersMicros,
    serverMicros: s.cpu.serverMicros,
  }));
  return summarizeThroughput(
    parts,
    slices[0].workersPerProcess,
    slices.reduce((total, s) => total + s.sections, 0),
  );
}

function summarizeThroughput(
  slices: Slice[],
  workersPerProcess: number,
  sections: number,
): ThroughputResult {
  const processes = slices[0].sectionsByProcess.length;
  const sectionsByProcess = Array.from({ length: processes }, (_, i) =>
    slices.reduce((total, s) => total + s.sectionsByProcess[i], 0),
  );
  const commands: Record<string, number> = {};
  for (const s of slices) {
    for (const [name, n] of Object.entries(s.commands)) commands[name] = (commands[name] ?? 0) + n;
  }
  const durationMs = slices.reduce((total, s) => total + s.durationMs, 0);
  const workersMicros = slices.reduce((total, s) => total + s.workersMicros, 0);
  const serverMicros = slices.some((s) => s.serverMicros === null)
    ? null
    : slices.reduce((total, s) => total + (s.serverMicros ?? 0), 0);
  const totalCommands = Object.values(commands).reduce((total, n) => total + n, 0);
  const per = (x: number) => (sections > 0 ? Math.round((x / sections) * 10) / 10 : Number.NaN);
  return {
    processes,
    workersPerProcess,
    durationMs,
    slices: slices.length,
    sections,
    failures: slices.reduce((total, s) => total + s.failures, 0),
    sectionsPerSecond: Math.round((sections / durationMs) * 1000 * 10) / 10,
    sectionsByProcess,
    shareMaxOverMin:
      Math.min(...sectionsByProcess) > 0
        ? Math.round((Math.max(...sectionsByProcess) / Math.min(...sectionsByProcess)) * 100) / 100
        : null,
    commands,
    commandsPerSection: sections > 0 ? Math.round((totalCommands / sections) * 100) / 100 : NaN,
    cpu: { workersMicros, serverMicros },
    cpuPerSection: {
      workers: per(workersMicros),
      server: serverMicros === null ? null : per(serverMicros),
      total: per(workersMicros + (serverMicros ?? 0)),
    },
  };
}
