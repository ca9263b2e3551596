import { sharedClockMs } from '../../test/support/fault-clock';
import type { BenchWorker } from '../support/bench-workers';

export interface ThroughputOptions {
  workersPerProcess: number;
  durationMs: number;
  criticalSectionMs: number;
}

export interface ThroughputResult {
  processes: number;
  workersPerProcess: number;
  durationMs: number;
  sections: number;
  failures: number;
  sectionsPerSecond: number;
  /** Sections completed by each process: a lock that stays in one process is fast but unfair. */
  sectionsByProcess: number[];
  /** Commands all processes sent during the run, by name. */
  commands: Record<string, number>;
}

/** Every worker of every process loops acquire → short critical section → release on one key. */
export async function measureThroughput(
  processes: BenchWorker[],
  options: ThroughputOptions,
): Promise<ThroughputResult> {
  // A common start time in the near future, so no process gets a head start alone.
  const startAt = sharedClockMs() + 500;
  const results = await Promise.all(
    processes.map((worker) =>
      worker.call('contend', {
        key: 'throughput',
        workers: options.workersPerProcess,
        startAt,
        durationMs: options.durationMs,
        criticalSectionMs: options.criticalSectionMs,
        // mongodash's default wait; the same for every variant.
        timeoutMs: 3000,
      }),
    ),
  );
  const sections = results.reduce((total, r) => total + r.sections, 0);
  const failures = results.reduce((total, r) => total + r.failures, 0);
  const commands: Record<string, number> = {};
  for (const r of results) {
    for (const [name, n] of Object.entries(r.commands)) commands[name] = (commands[name] ?? 0) + n;
  }
  return {
    processes: processes.length,
    workersPerProcess: options.workersPerProcess,
    durationMs: options.durationMs,
    sections,
    failures,
    sectionsPerSecond: Math.round((sections / options.durationMs) * 1000 * 10) / 10,
    sectionsByProcess: results.map((r) => r.sections),
    commands,
  };
}
