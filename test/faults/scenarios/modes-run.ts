import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { sharedClockMs, type IpcChild } from '@nestjs-mongo-lock/process-harness';
import type { WorkerEvent, WorkerOps } from '../../support/fault-protocol';
import { lockCollection, type FaultRun, type StartedWorker } from '../harness/fault-run';
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

/**
 * Every live lease as the server sees it now: a key's exclusive lease (its `holder`) and each
 * live, unreleased entry of `holders` (shared holders, permit holders), one row per lease.
 */
export async function readFinalModeLocks(run: FaultRun): Promise<FinalLockState[]> {
  const docs = await run.admin
    .db(run.dbName)
    .collection(lockCollection)
    .aggregate<{ _id: string; holder?: string | null; exclusive: boolean; entries: string[] }>([
      {
        $project: {
          holder: 1,
          exclusive: {
            $and: [
              { $ne: [{ $ifNull: ['$owner', null] }, null] },
              { $gt: ['$expiresAt', '$$NOW'] },
            ],
          },
          entries: {
            $map: {
              input: {
                $filter: {
                  input: { $objectToArray: { $ifNull: ['$holders', {}] } },
                  cond: {
                    $and: [
                      { $gt: ['$$this.v.expiresAt', '$$NOW'] },
                      { $eq: [{ $ifNull: ['$$this.v.releasedAt', null] }, null] },
                    ],
                  },
                },
              },
              in: '$$this.v.holder',
            },
          },
        },
      },
    ])
    .toArray();
  const observedAt = sharedClockMs();
  return docs.flatMap((doc) => [
    ...(doc.exclusive
      ? [{ key: String(doc._id), holder: doc.holder ?? null, held: true, observedAt }]
      : []),
    ...doc.entries.map((holder) => ({ key: String(doc._id), holder, held: true, observedAt })),
  ]);
}

/** Records the final leases and runs the mode-aware checker over the run's history. */
export async function checkModes(
  run: FaultRun,
  options: ModesCheckerOptions,
  extra: Violation[] = [],
): Promise<Violation[]> {
  const ending = await run.endWork();
  run.history.finalLocks = await readFinalModeLocks(run);
  return [...checkModesHistory(run.history, options), ...ending, ...extra];
}

/**
 * With `FAULT_MODES_DUMP=<dir>`, writes the run's history (and `extra`) to
 * `<dir>/<database>.json`, to read a failed run's timeline.
 */
export function dumpHistory(run: FaultRun, extra: Record<string, unknown>): void {
  const dir = process.env.FAULT_MODES_DUMP;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, `${run.dbName}.json`),
    JSON.stringify({ history: run.history, ...extra }, null, 1),
  );
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

/** One read of a key's lock document, as the server saw it then (times relative to `$$NOW`). */
export interface KeyStateSample {
  /** Shared clock, midway between sending the read and its answer. */
  at: number;
  exclusive: { holder: string | null; fence: string; remainingMs: number } | null;
  entries: { holder: string; fence: string; weight: number; remainingMs: number }[];
  reservations: { id: string; weight: number; ageMs: number; remainingMs: number }[];
}

/**
 * Reads one key's lock document every `intervalMs` until stopped (a debugging and liveness aid).
 */
export class KeyStateSampler {
  readonly samples: KeyStateSample[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    run: FaultRun,
    private readonly key: string,
    private readonly intervalMs = 50,
  ) {
    this.loop = this.sample(run);
  }

  async stop(): Promise<KeyStateSample[]> {
    this.stopped = true;
    await this.loop;
    return this.samples;
  }

  private async sample(run: FaultRun): Promise<void> {
    const collection = run.admin.db(run.dbName).collection(lockCollection);
    const live = (input: unknown, extra: unknown[]) => ({
      $filter: {
        input: { $objectToArray: { $ifNull: [input, {}] } },
        cond: { $and: [{ $gt: ['$$this.v.expiresAt', '$$NOW'] }, ...extra] },
      },
    });
    while (!this.stopped) {
      const sentAt = sharedClockMs();
      const [doc] = await collection
        .aggregate<{
          owner?: string | null;
          holder?: string | null;
          fence?: unknown;
          exclusiveMs: number | null;
          entries: {
            k: string;
            v: { holder: string; fence: unknown; weight: number; ms: number };
          }[];
          waiting: { k: string; v: { weight: number; age: number; ms: number } }[];
        }>(
          [
            { $match: { _id: this.key } },
            {
              $project: {
                owner: 1,
                holder: 1,
                fence: 1,
                exclusiveMs: { $subtract: ['$expiresAt', '$$NOW'] },
                entries: {
                  $map: {
                    input: live('$holders', [
                      { $eq: [{ $ifNull: ['$$this.v.releasedAt', null] }, null] },
                    ]),
                    in: {
                      k: '$$this.k',
                      v: {
                        holder: '$$this.v.holder',
                        fence: '$$this.v.fence',
                        weight: '$$this.v.weight',
                        ms: { $subtract: ['$$this.v.expiresAt', '$$NOW'] },
                      },
                    },
                  },
                },
                waiting: {
                  $map: {
                    input: live('$waiting', []),
                    in: {
                      k: '$$this.k',
                      v: {
                        weight: '$$this.v.weight',
                        age: { $subtract: ['$$NOW', '$$this.v.since'] },
                        ms: { $subtract: ['$$this.v.expiresAt', '$$NOW'] },
                      },
                    },
                  },
                },
              },
            },
          ],
          { maxTimeMS: 1000 },
        )
        .toArray()
        .catch(() => []);
      const at = (sentAt + sharedClockMs()) / 2;
      if (doc) {
        const exclusiveMs = Number(doc.exclusiveMs ?? 0);
        this.samples.push({
          at,
          exclusive:
            doc.owner != null && exclusiveMs > 0
              ? { holder: doc.holder ?? null, fence: String(doc.fence), remainingMs: exclusiveMs }
              : null,
          entries: doc.entries.map(({ v }) => ({
            holder: v.holder,
            fence: String(v.fence),
            weight: v.weight,
            remainingMs: Number(v.ms),
          })),
          reservations: doc.waiting.map(({ k, v }) => ({
            id: k,
            weight: v.weight,
            ageMs: Number(v.age),
            remainingMs: Number(v.ms),
          })),
        });
      }
      await sleep(Math.max(5, sentAt + this.intervalMs - sharedClockMs()));
    }
  }
}

/** An acquire call that waited from `from` until `to` (granted or given up), shared clock. */
export interface WaitSpan {
  worker: string;
  from: number;
  to: number;
}

/** The calls each section and each failed call of a `contend` waited through. */
export function waitSpans(
  sections: ModeSectionReport[],
  failedCalls: { calledAt: number; settledAt: number }[],
): WaitSpan[] {
  return [
    ...sections
      .filter((s) => s.requestedAt !== undefined)
      .map((s) => ({ worker: s.worker, from: s.requestedAt as number, to: s.start })),
    ...failedCalls.map((c) => ({ worker: '(timed out)', from: c.calledAt, to: c.settledAt })),
  ];
}

/**
 * Stretches longer than `boundMs` in which the sampler saw the key with no live lease at all
 * (neither exclusive nor any holder entry) while an acquire call waited through the whole
 * stretch: a free key nobody was given. Stretches that meet an `excused` window (a process
 * frozen, whose reservation may hold the others back until it runs again) are left out.
 */
export function findStalls(
  key: string,
  samples: KeyStateSample[],
  waits: WaitSpan[],
  boundMs: number,
  excused: { from: number; to: number }[] = [],
): Violation[] {
  const violations: Violation[] = [];
  let stretch: KeyStateSample[] = [];
  const close = () => {
    const ended = stretch;
    stretch = [];
    if (ended.length < 2) return;
    const from = ended[0].at;
    const to = ended[ended.length - 1].at;
    if (to - from <= boundMs) return;
    if (excused.some((e) => e.from <= to && e.to >= from)) return;
    const waiting = waits.filter((w) => w.from < from && w.to > to);
    if (waiting.length === 0) return;
    violations.push({
      kind: 'scenario',
      key,
      detail:
        `the key had no live lease for ${Math.round(to - from)} ms (bound ${boundMs} ms) while ` +
        `${waiting.length} acquire calls waited (${waiting
          .slice(0, 4)
          .map((w) => `${w.worker} since ${Math.round(from - w.from)} ms before`)
          .join(', ')}); reservations then: ${JSON.stringify(
          samples
            .find((s) => s.at >= from)
            ?.reservations.map((r) => ({ weight: r.weight, ageMs: Math.round(r.ageMs) })),
        )}`,
    });
  };
  for (const sample of samples) {
    if (sample.exclusive === null && sample.entries.length === 0) stretch.push(sample);
    else close();
  }
  close();
  return violations;
}
