import type { BenchServer } from './bench-process';

/** What bench/run.ts gives each suite it runs. */
export interface SuiteContext {
  /** A server of the suite's own, started for it and stopped after it. */
  server: BenchServer;
  /** When the suite was started, before its server: its results' `startedAt` and duration. */
  startedAt: Date;
  /** How the suite is run (`npm run bench -- --suite=modes`), recorded in its results. */
  command: string;
  /** Progress on stderr, prefixed with the suite's name. */
  log(message: string): void;
}

/**
 * Runs one suite, writes its results and resolves to the problems it found (wrong results,
 * not slow ones), which make the run exit with 1.
 */
export type SuiteRun = (context: SuiteContext) => Promise<string[]>;
