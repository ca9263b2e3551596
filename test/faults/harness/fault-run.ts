import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { MongoClient, type Collection, type Document } from 'mongodb';
import { sharedClockMs, IpcChild } from '@nestjs-mongo-lock/process-harness';
import { FencedResource, type FencedDocument } from '../../support/fault-fenced-resource';
import type { HeldLock, HoldArgs, WorkerEvent, WorkerOps } from '../../support/fault-protocol';
import type { FaultServer } from '../../support/fault-server';
import { checkHistory, type CheckerOptions } from '../history/checker';
import {
  findOrphanedLeases,
  summarizeLeaseSampling,
  type FailedAcquireCall,
} from '../history/orphans';
import {
  emptyHistory,
  type FinalLockState,
  type SectionRecord,
  type Violation,
} from '../history/history';
import { LeaseSampler } from './lease-sampler';
import { readLiveLeases } from './line-leases';
import { LockEventRecorder } from './lock-event-recorder';
import { withinMs } from './within-ms';

export interface WorkerSetup {
  label: string;
  clockSkewMs?: number;
  /** Extra `MongoLockModuleOptions` for this worker's service (JSON values). */
  options?: Record<string, unknown>;
  /** Extra connection-string options, e.g. `socketTimeoutMS=1500`. */
  uriOptions?: string;
  /** Connection string used as is instead of the server's, e.g. through a fault proxy. */
  uri?: string;
  /**
   * Directory to load the library from instead of the repository's `lib` (`FAULT_LIB_DIR`):
   * the mutation test runs workers on a deliberately broken copy.
   */
  libDir?: string;
  /** The worker tallies how its lock commands end (`commandTally`); see `StartArgs`. */
  monitorCommands?: { slowMs: number };
  /** The service gets the worker's application client (see `StartArgs.sharedClient`). */
  sharedClient?: boolean;
}

export type FaultWorkerProcess = IpcChild<WorkerOps, WorkerEvent>;

const workerEntry = path.resolve(__dirname, '../../support/fault-worker.ts');

export interface StartedWorker {
  process: FaultWorkerProcess;
  holderId: string;
  label: string;
}

export const lockCollection = 'locks';

/**
 * One scenario's world: its own database on the shared server, its worker processes, an admin
 * client for fail points, and the history every worker reports into.
 */
export class FaultRun {
  readonly history = emptyHistory();
  readonly dbName: string;
  readonly admin: MongoClient;
  private readonly workers: StartedWorker[] = [];
  private sampler:
    { sampler: LeaseSampler; recorder: LockEventRecorder; boundMs: number } | undefined;
  private readonly failedCalls: FailedAcquireCall[] = [];
  /** What ending the workers found (see `endWork`), once it ran. */
  private ending: Promise<Violation[]> | undefined;

  constructor(
    readonly server: FaultServer,
    scenario: string,
  ) {
    this.dbName = `faults_${scenario}_${randomBytes(3).toString('hex')}`;
    this.admin = new MongoClient(server.uri);
  }

  /** A URI whose `appName` lets a fail point target one worker's connections only. */
  uriFor(appName: string, extraOptions?: string): string {
    const separator = this.server.uri.includes('?') ? '&' : '?';
    const extra = extraOptions ? `&${extraOptions}` : '';
    return `${this.server.uri}${separator}appName=${encodeURIComponent(appName)}${extra}`;
  }

  /** Starts the workers in parallel (each pays ts-node's start-up once). */
  async spawn(setups: WorkerSetup[]): Promise<StartedWorker[]> {
    return Promise.all(setups.map((setup) => this.spawnOne(setup)));
  }

  private async spawnOne(setup: WorkerSetup): Promise<StartedWorker> {
    const process: FaultWorkerProcess = IpcChild.fork(workerEntry, {
      label: setup.label,
      env: {
        FAULT_CLOCK_SKEW_MS: String(setup.clockSkewMs ?? 0),
        ...(setup.libDir === undefined ? {} : { FAULT_LIB_DIR: path.resolve(setup.libDir) }),
      },
      onEvent: (event: WorkerEvent) => this.recordSection(event.section),
    });
    const { holderId, libDir } = await process.call('start', {
      uri: setup.uri ?? this.uriFor(setup.label, setup.uriOptions),
      dbName: this.dbName,
      collectionName: lockCollection,
      options: setup.options,
      label: setup.label,
      monitorCommands: setup.monitorCommands,
      sharedClient: setup.sharedClient,
    });
    if (setup.libDir !== undefined && libDir !== path.resolve(setup.libDir)) {
      await process.stop();
      throw new Error(`${setup.label} loaded the library from ${libDir}, not ${setup.libDir}`);
    }
    const worker = { process, holderId, label: setup.label };
    this.workers.push(worker);
    return worker;
  }

  /**
   * Acquires through a worker and records the acquisition as open at once, so that it is
   * accounted for even if the worker never reports back (killed, paused, or a leak).
   */
  async hold(worker: StartedWorker, args: HoldArgs): Promise<HeldLock> {
    const held = await worker.process.call('hold', args);
    this.recordSection({
      key: held.key,
      fence: held.fence,
      holder: worker.holderId,
      worker: worker.label,
      pid: worker.process.pid,
      start: held.start,
      end: null,
      outcome: 'open',
      deadline: null,
      signalAt: null,
    });
    return held;
  }

  /** A section reported at its end replaces the open record of the same acquisition. */
  private recordSection(section: SectionRecord): void {
    const sections = this.history.sections;
    const open = sections.findIndex(
      (s) =>
        s.outcome === 'open' &&
        s.holder === section.holder &&
        s.key === section.key &&
        s.fence === section.fence,
    );
    if (open >= 0) sections[open] = section;
    else sections.push(section);
  }

  /** Kills a worker with SIGKILL and records its death for the checker. */
  async kill(worker: StartedWorker): Promise<number> {
    worker.process.signal('SIGKILL');
    await worker.process.exited;
    const diedAt = sharedClockMs();
    this.history.deaths.push({ holder: worker.holderId, pid: worker.process.pid, diedAt });
    return diedAt;
  }

  /** Freezes a worker with SIGSTOP and records the pause, the checker's one excuse for a late notice. */
  pause(worker: StartedWorker): number {
    worker.process.signal('SIGSTOP');
    const from = sharedClockMs();
    this.history.pauses.push({ pid: worker.process.pid, from, to: null });
    return from;
  }

  /** Thaws a worker paused with {@link pause} (SIGCONT) and records the end of its pause. */
  resume(worker: StartedWorker): number {
    const pause = this.history.pauses.find((p) => p.pid === worker.process.pid && p.to === null);
    if (!pause) throw new Error(`${worker.label} is not paused`);
    worker.process.signal('SIGCONT');
    pause.to = sharedClockMs();
    return pause.to;
  }

  /**
   * Configures `failCommand` and returns how many times it has fired since the server started
   * (the server's `count`): the difference between two calls is what the first configuration did.
   */
  async failPoint(mode: Document | 'alwaysOn' | 'off', data: Document = {}): Promise<number> {
    const reply = await this.admin
      .db('admin')
      .command({ configureFailPoint: 'failCommand', mode, data });
    return Number(reply.count);
  }

  /** Whether `failCommand` has fired `times` times since the server started, waiting up to `ms`. */
  async failPointFired(times: number, ms: number): Promise<boolean> {
    const wait = { waitForFailPoint: 'failCommand', timesEntered: times, maxTimeMS: ms };
    return this.admin
      .db('admin')
      .command(wait)
      .then(
        () => true,
        (error: unknown) => {
          if ((error as { code?: unknown }).code === 50) return false;
          throw error;
        },
      );
  }

  /** The fenced resource as the workers wrote it. */
  async readResource(id: string): Promise<FencedDocument | null> {
    return new FencedResource(this.admin.db(this.dbName)).read(id);
  }

  /** The lock collection's lines (`<collectionName>_line`), where the service keeps its locks. */
  get lines(): Collection<Document> {
    return this.admin.db(this.dbName).collection(`${lockCollection}_line`);
  }

  /** Every key of the lock collection as the server sees it now (leases checked with `$$NOW`). */
  async readFinalLocks(): Promise<FinalLockState[]> {
    const { keys, leases } = await readLiveLeases(this.lines);
    const observedAt = sharedClockMs();
    return keys.map((key) => {
      const lease = leases.find((each) => each.key === key);
      return {
        key,
        holder: lease?.holder ?? null,
        held: lease !== undefined,
        observedAt,
        ...(lease ? { lease: { fence: lease.fence, remainingMs: lease.remainingMs } } : {}),
      };
    });
  }

  /**
   * Opt-in leak check: samples the lock collection every `intervalMs` (default 150) from now
   * on; {@link check} then also reports every lease live for longer than `boundMs` that no
   * section accounts for (`orphaned-lease`, see `history/orphans.ts`). Use
   * `orphanBoundMs(operationTimeoutMs)` for the bound. The lock collection's changes are
   * recorded meanwhile, and an orphaned lease's violation shows its key's changes around the
   * write of its fence.
   */
  sampleLeases(options: { boundMs: number; intervalMs?: number }): void {
    if (this.sampler) throw new Error('the lease sampler is already running');
    const sampler = new LeaseSampler(this.lines, options.intervalMs ?? 150);
    const recorder = new LockEventRecorder(this.lines);
    this.sampler = { sampler, recorder, boundMs: options.boundMs };
  }

  /** A worker's failed acquire calls (`ContendStats.failedCalls`), for the orphan check. */
  noteFailedCalls(
    worker: StartedWorker,
    calls: readonly { key: string; calledAt: number; settledAt: number }[],
  ): void {
    for (const call of calls) this.failedCalls.push({ holder: worker.holderId, ...call });
  }

  /** What the lease sampler saw, for a scenario's notes ('' when it did not run). */
  leaseSamplingNotes(): string {
    if (!this.sampler) return '';
    const { sampler } = this.sampler;
    const seen = summarizeLeaseSampling(this.history, sampler.observations);
    return (
      `${sampler.summary()}; ${seen.leases} leases seen, ${seen.unmatched} without a section ` +
      `(longest ${Math.round(seen.longestUnmatchedMs)} ms)`
    );
  }

  /**
   * Ends the live workers' services, then records the final lock states and runs the checker
   * over the whole history (see {@link endWork}).
   */
  async check(options: CheckerOptions, extra: Violation[] = []): Promise<Violation[]> {
    const ending = await this.endWork();
    const orphans = await this.checkSampledLeases(options);
    this.history.finalLocks = await this.readFinalLocks();
    const violations = [...checkHistory(this.history, options), ...orphans, ...ending, ...extra];
    this.dumpHistory({ violations });
    return violations;
  }

  /**
   * With `FAULT_HISTORY_DUMP=<dir>`, writes the run's history (and `extra`) to
   * `<dir>/<database>.json`, to read a failed run's timeline.
   */
  dumpHistory(extra: Record<string, unknown>): void {
    const dir = process.env.FAULT_HISTORY_DUMP;
    if (!dir) return;
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      path.join(dir, `${this.dbName}.json`),
      JSON.stringify({ history: this.history, ...extra }, null, 1),
    );
  }

  /**
   * All work has ended only once the library's own clean-up has: a win nobody was told of, or
   * a lost lease, is given back in the background, and `close()` waits for that (FINDINGS L7).
   * So every worker that still answers (not killed, not frozen) is closed before the final
   * read, and a live lease left after it is a leaked lock. Closing gives back what a service
   * still holds, so that is checked first: a lock held by a service but by none of its callers
   * is leaked too. Returns those leaks, and closes that did not finish in time (once: later
   * calls return the same).
   */
  endWork(): Promise<Violation[]> {
    this.ending ??= this.endLiveWorkers();
    return this.ending;
  }

  private async endLiveWorkers(): Promise<Violation[]> {
    const frozen = new Set(this.history.pauses.filter((p) => p.to === null).map((p) => p.pid));
    const live = this.workers.filter((w) => w.process.alive && !frozen.has(w.process.pid));
    const found = await Promise.all(live.map((w) => this.endWorker(w)));
    return found.flat();
  }

  private async endWorker(worker: StartedWorker): Promise<Violation[]> {
    const violations: Violation[] = [];
    const held = await withinMs(
      worker.process.call('heldCount', {}).catch(() => undefined),
      CLOSE_LIMIT_MS,
    );
    if (held !== undefined && held.library > held.open) {
      violations.push({
        kind: 'leaked-lock',
        key: '*',
        detail:
          `${worker.label}'s service still held ${held.library} lock(s) after all work ` +
          `ended, ${held.open} of them by a caller`,
      });
    }
    const closed = await withinMs(
      worker.process.call('close', {}).catch(() => 'gone' as const),
      CLOSE_LIMIT_MS,
    );
    if (closed === undefined && worker.process.alive) {
      violations.push({
        kind: 'scenario',
        key: '*',
        detail: `${worker.label}'s close() did not finish within ${CLOSE_LIMIT_MS} ms`,
      });
    }
    return violations;
  }

  /** Stops the lease sampler (if it ran) and looks for orphaned leases in what it saw. */
  private async checkSampledLeases(options: CheckerOptions): Promise<Violation[]> {
    if (!this.sampler) return [];
    const { sampler, recorder, boundMs } = this.sampler;
    await sampler.stop();
    await recorder.stop();
    return findOrphanedLeases(this.history, sampler.observations, {
      boundMs,
      leaseMs: options.leaseMs,
      expiryMarginMs: options.expiryMarginMs,
      holderPids: new Map(this.workers.map((w) => [w.holderId, w.process.pid])),
      failedCalls: this.failedCalls,
      explain: (key, fence) => recorder.around(key, fence),
    });
  }

  async stop(): Promise<void> {
    await this.sampler?.sampler.stop();
    await this.sampler?.recorder.stop();
    await this.failPoint('off').catch(() => undefined);
    await Promise.all(this.workers.map((w) => w.process.stop('close')));
    await this.admin
      .db(this.dbName)
      .dropDatabase()
      .catch(() => undefined);
    await this.admin.close();
  }
}

/** Longest a live worker may take to answer, or to close: its grace, give-backs and client. */
const CLOSE_LIMIT_MS = 20_000;
