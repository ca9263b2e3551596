import { performance } from 'node:perf_hooks';
import type { ClientSession, MongoClient } from 'mongodb';
import type { AcquireOptions, LockHandle, LockService } from '../../../lib';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import {
  deadlineToRecord,
  isLockLostError,
  sharedDeadline,
  watchSignal,
  type SignalWatch,
} from '../../support/fault-contention';
import type { ContendStats, HoldPlan } from '../../support/fault-protocol';
import type { SectionRecord } from '../history/history';
import type {
  ModeMixEntry,
  ModeOptions,
  ModeSectionReport,
  ModesContendArgs,
  ModesWorkerOps,
  TxSectionOutcome,
} from './modes-protocol';

// Worker side of the mode scenarios: runs inside `test/support/fault-worker.ts` (which serves
// these handlers beside its own), on the library that worker loaded. Only types come from
// `lib` here: a worker may run a copy of the library (the mutants).

export interface ModesWorkerDeps {
  service(): LockService;
  label(): string;
  /** The scenario's database (`StartArgs.dbName`). */
  dbName(): string;
  report(section: ModeSectionReport): void;
}

type Handlers = {
  [K in keyof ModesWorkerOps]: (args: ModesWorkerOps[K][0]) => Promise<ModesWorkerOps[K][1]>;
};

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * The acquisition options of `options`, without the ones left out (the library refuses a lone
 * `weight`).
 */
export function modeOptionsOf(options: ModeOptions): AcquireOptions {
  const picked: AcquireOptions = {};
  if (options.mode !== undefined) picked.mode = options.mode;
  if (options.permits !== undefined) picked.permits = options.permits;
  if (options.weight !== undefined) picked.weight = options.weight;
  if (options.scope !== undefined) picked.scope = options.scope;
  return picked;
}

/** How the checker records an acquisition asked for with `options`. */
function modeFields(options: ModeOptions): Partial<ModeSectionReport> {
  if (options.permits !== undefined) {
    return {
      mode: 'shared',
      permits: options.permits,
      weight: options.weight ?? 1,
      scope: options.scope,
    };
  }
  return { mode: options.mode ?? 'exclusive', scope: options.scope };
}

/** What the handle says about its mode, when it is not what was asked; else undefined. */
function modeMismatch(handle: LockHandle, options: ModeOptions): string | undefined {
  const mode = options.permits !== undefined ? 'shared' : (options.mode ?? 'exclusive');
  const permits =
    options.permits === undefined ? undefined : { of: options.permits, held: options.weight ?? 1 };
  const same =
    handle.mode === mode &&
    JSON.stringify(handle.permits ?? null) === JSON.stringify(permits ?? null);
  return same
    ? undefined
    : `asked for ${JSON.stringify({ mode, permits })}, the handle says ` +
        `${JSON.stringify({ mode: handle.mode, permits: handle.permits })}`;
}

interface SectionPlan extends ModeOptions {
  key: string;
  ttlMs: number;
  timeoutMs: number;
  renew: boolean;
  holdMs: number;
  worker: string;
}

type SectionResult =
  | { held: false; error: unknown; calledAt: number; settledAt: number }
  | {
      held: true;
      section: ModeSectionReport;
      /** Anything the library did that a correct one would not, as text. */
      problems: string[];
      calledAt: number;
      settledAt: number;
    };

/**
 * One acquisition: `acquire` with the plan's mode, reported open at once (so a killed or
 * frozen holder is accounted for), held `holdMs` or until its signal aborts, reported with its
 * end of work, released, and reported again complete.
 */
async function runSection(deps: ModesWorkerDeps, plan: SectionPlan): Promise<SectionResult> {
  const service = deps.service();
  const calledAt = sharedClockMs();
  let handle: LockHandle;
  try {
    handle = await service.acquire(plan.key, {
      ttlMs: plan.ttlMs,
      timeoutMs: plan.timeoutMs,
      renew: plan.renew,
      ...modeOptionsOf(plan),
    });
  } catch (error) {
    return { held: false, error, calledAt, settledAt: sharedClockMs() };
  }
  const watch = watchSignal(handle);
  const start = sharedClockMs();
  const problems: string[] = [];
  const mismatch = modeMismatch(handle, plan);
  if (mismatch) problems.push(`${plan.key}: ${mismatch}`);
  const base: ModeSectionReport = {
    key: plan.key,
    fence: handle.fence.toString(),
    holder: service.holderId,
    worker: plan.worker,
    pid: process.pid,
    start,
    end: null,
    outcome: 'open',
    deadline: null,
    signalAt: null,
    requestedAt: calledAt,
    ...modeFields(plan),
  };
  deps.report({
    ...base,
    // An unrenewed lease's deadline is final at its grant: a process killed while holding it
    // is then judged by it, not by its death (its report at the end never comes).
    deadline: plan.renew ? null : sharedDeadline(handle),
    renew: plan.renew,
    plannedHoldMs: plan.holdMs,
    leaseEndAtGrant: sharedDeadline(handle),
  });
  await sleepUnlessAborted(plan.holdMs, handle.signal);
  const end = sharedClockMs();
  // Read just before release is sent (or kept from the abort): the deadline this section had.
  const deadline = deadlineToRecord(handle, watch);
  // Reported before the release is sent: a kill once it has landed must not leave the
  // section working, for the checker, until the death (FINDINGS L18).
  deps.report({ ...base, end, deadline, signalAt: watch.signalAt });
  let outcome: SectionRecord['outcome'] = handle.signal.aborted ? 'lost' : 'released';
  try {
    await handle.release();
    if (watch.signalAt !== null) outcome = 'lost';
  } catch (error) {
    if (isLockLostError(error)) {
      outcome = 'lost';
    } else {
      outcome = 'open';
      problems.push(`${plan.key}: release of fence ${base.fence} failed: ${describeError(error)}`);
    }
  }
  const section: ModeSectionReport = {
    ...base,
    end,
    outcome,
    deadline,
    signalAt: watch.signalAt,
  };
  deps.report(section);
  return { held: true, section, problems, calledAt, settledAt: sharedClockMs() };
}

function pick(mix: ModeMixEntry[]): ModeMixEntry {
  const total = mix.reduce((sum, entry) => sum + entry.share, 0);
  let roll = Math.random() * total;
  for (const entry of mix) {
    roll -= entry.share;
    if (roll < 0) return entry;
  }
  return mix[mix.length - 1];
}

function sampleHoldMs(plan: HoldPlan): number {
  if (Math.random() < plan.longShare) {
    return plan.longMinMs + Math.random() * (plan.longMaxMs - plan.longMinMs);
  }
  return Math.random() * plan.shortMaxMs;
}

/** `runContention` for the modes: each section's mode, weight and hold drawn from the mix. */
async function contendModes(deps: ModesWorkerDeps, args: ModesContendArgs): Promise<ContendStats> {
  const stats: ContendStats = {
    sections: 0,
    lost: 0,
    timeouts: 0,
    unavailable: 0,
    maxSettleOvershootMs: -args.timeoutMs,
    errors: [],
    failedCalls: [],
  };
  let started = 0;
  const noteError = (text: string) => {
    if (stats.errors.length < 20) stats.errors.push(text);
  };
  const mayStart = () => sharedClockMs() < args.stopAt && started < args.maxSections;
  async function worker(index: number): Promise<void> {
    while (mayStart()) {
      started++;
      const entry = pick(args.mix);
      const calledAt = performance.now();
      const result = await runSection(deps, {
        key: args.key,
        ttlMs: args.ttlMs,
        timeoutMs: args.timeoutMs,
        renew: Math.random() < (entry.renewShare ?? 0),
        holdMs: sampleHoldMs(entry.hold),
        worker: `${deps.label()}:w${index}`,
        mode: entry.mode,
        permits: entry.permits,
        weight: entry.weight,
        scope: entry.scope,
      });
      if (result.held) {
        stats.maxSettleOvershootMs = Math.max(
          stats.maxSettleOvershootMs,
          result.section.start - result.calledAt - args.timeoutMs,
        );
        stats.sections++;
        if (result.section.outcome === 'lost') stats.lost++;
        result.problems.forEach(noteError);
      } else {
        stats.maxSettleOvershootMs = Math.max(
          stats.maxSettleOvershootMs,
          performance.now() - calledAt - args.timeoutMs,
        );
        stats.failedCalls?.push({
          key: args.key,
          calledAt: result.calledAt,
          settledAt: result.settledAt,
        });
        const name = errorName(result.error);
        if (name === 'LockNotAcquiredError') stats.timeouts++;
        else if (name === 'LockStoreUnavailableError') stats.unavailable++;
        else noteError(describeError(result.error));
      }
      if (args.gapMaxMs) await sleep(Math.random() * args.gapMaxMs);
    }
  }
  await Promise.all(Array.from({ length: args.workers }, (_, i) => worker(i)));
  return stats;
}

/**
 * The client a session belongs to: the driver keeps it on the session (left out of its
 * typings) and refuses a session on another client's collections.
 */
function clientOf(session: ClientSession): MongoClient {
  const client = (session as unknown as { client?: MongoClient }).client;
  if (!client) throw new Error('the transaction session carries no client');
  return client;
}

/** A freeze shows as a jump of the clock between two readings longer than this. */
const clockJumpMs = 200;
/** An armed transaction that is not frozen spins this long at most. */
const spinMaxMs = 1500;

/**
 * Spins until the clock jumps (the process was frozen with SIGSTOP and thawed) or for at most
 * {@link spinMaxMs}, as the document-commit worker does: a thawed holder then leaves `fn`
 * and asks to commit before its event loop runs any timer, the handle's deadline included.
 */
function spinUntilThawed(begin: number): boolean {
  let last = begin;
  for (;;) {
    const now = performance.now();
    if (now - last > clockJumpMs) return true;
    if (now - begin > spinMaxMs) return false;
    last = now;
  }
}

export function modesHandlers(deps: ModesWorkerDeps): Handlers {
  return {
    contendModes: (args) => contendModes(deps, args),

    async modeSection(args) {
      const result = await runSection(deps, {
        ...args,
        worker: `${deps.label()}:${args.name}`,
      });
      if (!result.held) {
        return {
          ok: false,
          errorName: errorName(result.error),
          message: describeError(result.error),
          calledAt: result.calledAt,
          settledAt: result.settledAt,
        };
      }
      if (result.problems.length > 0) throw new Error(result.problems.join('; '));
      const { section } = result;
      return {
        ok: true,
        outcome: section.outcome,
        fence: section.fence,
        start: section.start,
        signalAt: section.signalAt,
        calledAt: result.calledAt,
        settledAt: result.settledAt,
      };
    },

    async txSection(args) {
      const service = deps.service();
      const worker = `${deps.label()}:${args.name}`;
      const calledAt = sharedClockMs();
      let runs = 0;
      let thawed = false;
      const started: { handle?: LockHandle; section?: ModeSectionReport; watch?: SignalWatch } = {};
      const settled = await service
        .withLock(
          args.key,
          async (handle) => {
            runs += 1;
            if (!started.section) {
              const watch = watchSignal(handle);
              const section: ModeSectionReport = {
                key: args.key,
                fence: handle.fence.toString(),
                holder: service.holderId,
                worker,
                pid: process.pid,
                start: sharedClockMs(),
                end: null,
                outcome: 'open',
                deadline: null,
                signalAt: null,
                requestedAt: calledAt,
                ...modeFields(args),
              };
              Object.assign(started, { handle, section, watch });
              deps.report({ ...section, leaseEndAtGrant: sharedDeadline(handle), runs });
            }
            const { section, watch } = started as Required<typeof started>;
            if (runs > 1) deps.report({ ...section, runs });
            const session = handle.session;
            if (!session) throw new Error('withLock({ transaction: true }) gave no session');
            await clientOf(session)
              .db(deps.dbName())
              .collection(args.markerCollection)
              .insertOne(
                { _id: args.markerId as never, fence: section.fence, worker, run: runs },
                { session },
              );
            if (args.spin && runs === 1) {
              // The parent freezes this process when it hears of the marker: the spin counts
              // from before the report, since the SIGSTOP may land inside it.
              const spinFrom = performance.now();
              deps.report({ ...section, markerWritten: true });
              thawed = spinUntilThawed(spinFrom);
            } else {
              await sleepUnlessAborted(args.workMs, handle.signal);
            }
            section.end = sharedClockMs();
            section.deadline = deadlineToRecord(handle, watch);
            return handle.signal.aborted ? 'stopped on abort' : 'done';
          },
          {
            ttlMs: args.ttlMs,
            timeoutMs: args.timeoutMs,
            renew: true,
            transaction: true,
            ...modeOptionsOf(args),
          },
        )
        .then(
          (result) => ({ ok: true as const, result }),
          (error: unknown) => ({
            ok: false as const,
            errorName: errorName(error),
            message: describeError(error),
          }),
        );
      const { section, watch, handle } = started;
      if (section && watch && handle) {
        const lost =
          handle.signal.aborted || (!settled.ok && settled.errorName === 'LockLostError');
        deps.report({
          ...section,
          end: section.end ?? sharedClockMs(),
          deadline: section.deadline ?? deadlineToRecord(handle, watch),
          outcome: lost ? 'lost' : 'released',
          signalAt: watch.signalAt,
        });
      }
      const outcome: TxSectionOutcome = {
        ...settled,
        calledAt,
        settledAt: sharedClockMs(),
        runs,
        thawed,
      };
      return outcome;
    },

    async releaseScope({ scope }) {
      const calledAt = sharedClockMs();
      const released = await deps.service().releaseScope(scope);
      return { released, calledAt, settledAt: sharedClockMs() };
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}
