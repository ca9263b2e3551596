import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { sharedClockMs, type IpcChild } from '@nestjs-mongo-lock/process-harness';
import type { WorkerEvent, WorkerOps } from '../../support/fault-protocol';
import type { FaultRun, StartedWorker } from '../harness/fault-run';
import { readLiveLeases } from '../harness/line-leases';
import type { FinalLockState, Violation } from '../history/history';
import { checkModesHistory, type ModesCheckerOptions } from '../history/modes-checker';
import type { ModeSectionReport, ModesWorkerOps } from './modes-protocol';
import { sleep } from './scenario';

// Parent-side helpers of the mode scenarios: the workers' mode operations, what they reported,
// the final state of every lease (holder entries included), the checker, and mutant libraries.

export type ModesProcess = IpcChild<WorkerOps & ModesWorkerOps, WorkerEvent>;

/** A `FaultRun` worker, with the mode operations `fault-worker.ts` serves beside its own. */
export function modes(worker: StartedWorker): ModesProcess {
  return worker.process as unknown as ModesProcess;
}

/** What the workers reported so far (each section once: its last report). */
export function reports(run: FaultRun): ModeSectionReport[] {
  // The extra fields are optional: a report that lacks them is an exclusive lock.
  return run.history.sections;
}

/**
 * The first report `accept` takes, waiting for one up to `timeoutMs` (`null` then). Reports
 * land in `run.history` as the worker's IPC messages arrive; this looks every 2 ms.
 */
export function waitForReport(
  run: FaultRun,
  accept: (report: ModeSectionReport) => boolean,
  timeoutMs: number,
): Promise<ModeSectionReport | null> {
  return waitFor(() => reports(run).find(accept), timeoutMs);
}

/**
 * The first value `probe` gives other than `undefined`, looking every 2 ms; `null` after
 * `timeoutMs`.
 */
export async function waitFor<T>(probe: () => T | undefined, timeoutMs: number): Promise<T | null> {
  const until = sharedClockMs() + timeoutMs;
  for (;;) {
    const found = probe();
    if (found !== undefined) return found;
    if (sharedClockMs() >= until) return null;
    await sleep(2);
  }
}

/** Every live lease as the server sees it now: each holder of each key, one row per lease. */
export async function readFinalModeLocks(run: FaultRun): Promise<FinalLockState[]> {
  const { leases } = await readLiveLeases(run.lines);
  const observedAt = sharedClockMs();
  return leases.map(({ key, holder }) => ({ key, holder, held: true, observedAt }));
}

/** Records the final leases and runs the mode-aware checker over the run's history. */
export async function checkModes(
  run: FaultRun,
  options: ModesCheckerOptions,
  extra: Violation[] = [],
): Promise<Violation[]> {
  const ending = await run.endWork();
  run.history.finalLocks = await readFinalModeLocks(run);
  const violations = [...checkModesHistory(run.history, options), ...ending, ...extra];
  run.dumpHistory({ violations });
  return violations;
}

/** Milliseconds since `time` (shared clock), for notes. */
export function since(time: number): number {
  return Math.round(sharedClockMs() - time);
}

export function randomBetween(min: number, max: number): number {
  return min + Math.random() * (max - min);
}

const repoRoot = path.resolve(__dirname, '../../..');
/** Inside the repository, so the copy resolves `node_modules`; git-, lint- and format-ignored. */
const copiesRoot = path.join(repoRoot, '.fault-lib-copies');

/**
 * One textual change of a library file: `anchor` must occur exactly once. `or`: the same code
 * as it read in other versions of the library, with its replacement; the first pair whose
 * anchor occurs exactly once is used.
 */
export interface MutantPatch {
  file: string;
  anchor: string;
  replacement: string;
  or?: { anchor: string; replacement: string }[];
}

/**
 * Copies the library under test (`FAULT_LIB_DIR`, or the repository's `lib`) to
 * `.fault-lib-copies/<name>-<pid>/lib` with `patches` applied, as `mutation.fault-spec.ts`
 * does; returns the copy's directory. Fails loudly if an anchor is not found exactly once:
 * the code moved, and the mutant must follow it rather than be dropped.
 */
export function makeModesMutant(name: string, patches: MutantPatch[]): string {
  const sourceLib = path.resolve(process.env.FAULT_LIB_DIR ?? path.join(repoRoot, 'lib'));
  const target = path.join(copiesRoot, `${name}-${process.pid}`, 'lib');
  rmSync(target, { recursive: true, force: true });
  mkdirSync(path.dirname(target), { recursive: true });
  cpSync(sourceLib, target, { recursive: true, filter: (file) => !file.endsWith('.spec.ts') });
  for (const patch of patches) {
    const { file } = patch;
    const filePath = path.join(target, file);
    const source = readFileSync(filePath, 'utf8');
    const candidates = [patch, ...(patch.or ?? [])];
    const edit = candidates.find((c) => source.split(c.anchor).length - 1 === 1);
    if (edit === undefined) {
      rmSync(path.dirname(target), { recursive: true, force: true });
      throw new Error(
        `Mutant ${name}: no anchor of ${JSON.stringify(candidates.map((c) => c.anchor))} ` +
          `occurs exactly once in ${file}. The code moved or changed: update the mutant, do not drop it.`,
      );
    }
    const { anchor, replacement } = edit;
    // A function, not a string: `$$` in a replacement string would collapse to `$`.
    writeFileSync(
      filePath,
      source.replace(anchor, () => replacement),
    );
  }
  return target;
}

/** Removes a copy made by {@link makeModesMutant}, unless `FAULT_KEEP_MUTANT` is set. */
export function removeModesMutant(libDir: string): void {
  if (!process.env.FAULT_KEEP_MUTANT) {
    rmSync(path.dirname(libDir), { recursive: true, force: true });
  }
}
