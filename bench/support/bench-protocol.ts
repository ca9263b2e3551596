import type { VariantName } from '../adapters/bench-lock';

export interface ContendArgs {
  key: string;
  workers: number;
  /** Shared-clock time at which every process starts. */
  startAt: number;
  /**
   * Run first and not counted: each process's stream opening and first place in line, and
   * more of them with more processes, would otherwise weigh on a short slice.
   */
  warmupMs: number;
  /** The counted window after the warm-up. */
  durationMs: number;
  criticalSectionMs: number;
  timeoutMs: number;
}

export interface ContendResult {
  /** Sections completed while the window was open. */
  sections: number;
  /** Waits that gave up, over the whole slice (warm-up and drain included). */
  failures: number;
  /** Commands the variant in use sent from this process in the window, by name. */
  commands: Record<string, number>;
  /** CPU time (user + system, `process.cpuUsage()`) this process used in the window, in µs. */
  cpuMicros: number;
}

export interface CommandCounts {
  acquire: Record<string, number>;
  release: Record<string, number>;
}

/** Operations the benchmark runner asks of a worker process. */
export type BenchOps = {
  /** Connects and prepares every variant; `use` picks the one later calls drive. */
  start: [{ variants: VariantName[]; uri: string; dbName: string }, { pid: number }];
  use: [{ variant: VariantName }, { variant: VariantName }];
  hold: [{ key: string; timeoutMs: number }, { at: number }];
  startWaiting: [{ key: string; timeoutMs: number }, { at: number }];
  awaitAcquired: [{ key: string }, { at: number }];
  release: [{ key: string }, { at: number }];
  contend: [ContendArgs, ContendResult];
  ping: [{ count: number }, { samples: number[] }];
  /** The change-event floor (`measureEventFloor`): the watcher's next event is awaited. */
  watchRelay: [Record<string, never>, { at: number }];
  relayWrite: [Record<string, never>, { at: number }];
  awaitRelay: [Record<string, never>, { at: number }];
  countCommands: [{ key: string }, CommandCounts];
  close: [Record<string, never>, { closed: true }];
};

/** `uri` with its path set to `dbName` (mongodash takes the database from the URI). */
export function uriWithDatabase(uri: string, dbName: string): string {
  const url = new URL(uri);
  url.pathname = `/${dbName}`;
  return url.toString();
}
