import { liveEntries } from '../../../lib/store/line/line-document';
import type { LineEntry } from '../../../lib/store/line/line-document';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import { MongoClient } from 'mongodb';
import { sharedClockMs, IpcChild } from '@nestjs-mongo-lock/process-harness';
import type {
  CommitLogEntry,
  DocumentAcquiredEvent,
  DocumentCommitEvent,
  DocumentContendStats,
  DocumentWorkerEvent,
  DocumentWorkerOps,
} from '../../support/fault-document-protocol';
import type { FaultServer } from '../../support/fault-server';
import { checkHistory } from '../history/checker';
import { emptyHistory, type SectionRecord, type Violation } from '../history/history';
import { Expectations, sleep, type Scenario, type ScenarioOutcome } from './scenario';

/** Short, unrenewed leases: a holder frozen during its work outlives its lease. */
const ttlMs = 1200;
/** Work between acquisition and commit: well inside the lease (its local deadline is ttl − 60 ms). */
const workMinMs = 150;
const workMaxMs = 450;
/** How long past its lease a frozen holder stays frozen. */
const pastLeaseMinMs = 400;
const pastLeaseMaxMs = 900;
/** In a freeze of every process, how long the holder runs alone before the others thaw. */
const holderAloneMs = 250;
/** A pause "covers the lease" when the holder thaws this long after its lease must have ended (clock slack). */
const leaseCoverSlackMs = 100;
/** Generous: a correctness bound (the dead holder's lease ended), not a speed claim. */
const takeoverMarginMs = 3000;
/**
 * How long a fault waits for a holder to aim at: a liveness bound, not a speed claim. Four
 * processes pass the document every few hundred ms; a loaded 2-core machine once took over 5 s.
 */
const grantWaitMs = 15_000;
/** Leaves the end of the run to the workers: no fault starts this close to it. */
const quietEndMs = 3000;
const processes = 4;
const documentId = 'counter';
const collection = 'doc_commit';
const polling = { changeStreams: 'off', pollIntervalMs: 25, maxPollIntervalMs: 100 };

/**
 * - `pause-holder`: SIGSTOP the holder during its work, past its lease; the others take the
 *   document meanwhile, so the thawed holder's commit meets another owner (the owner check).
 * - `pause-all`: SIGSTOP the holder and every other process past the holder's lease, thaw the
 *   holder alone first: its commit meets its own owner token on an expired lease (the
 *   lease-liveness check by `$$NOW`), with nobody else to take the lock in between.
 * - `kill`: SIGKILL the holder during its work; others take over once its lease has ended,
 *   and a new process replaces it.
 */
type Fault = 'pause-holder' | 'pause-all' | 'kill';
const cycle: Fault[] = ['pause-holder', 'pause-all', 'kill', 'pause-holder', 'pause-all'];

const workerEntry = path.resolve(__dirname, '../../support/fault-document-worker.ts');

type WorkerProcess = IpcChild<DocumentWorkerOps, DocumentWorkerEvent>;

interface Worker {
  label: string;
  process: WorkerProcess;
  holderId: string;
  pid: number;
  killed: boolean;
  /** Settles when the worker's loop ends (stats), or with `null` if it died. */
  contended: Promise<DocumentContendStats | null>;
}

export interface DocumentCommitOptions {
  /** Library copy the workers load (`FAULT_LIB_DIR`): the mutation test's broken copies. */
  libDir?: string;
  /** How long processes contend (faults stop {@link quietEndMs} before). Default 17 s. */
  durationMs?: number;
}

function randomBetween(min: number, max: number): number {
  return min + Math.random() * (max - min);
}

/**
 * Several processes lock one document and `commit({ $inc: { counter: 1 }, $push: … })`, no
 * renewal, while the harness freezes holders past their lease (alone, or with everyone else)
 * and kills some. Checked at the end: the counter equals the commits that resolved, in the
 * order they were granted (each commit saw the previous one's counter); no commit landed after
 * its holder was frozen past its lease, and such late commits were really tried and refused by
 * the server; the history checker's overlap, notice and fence rules; takeovers after a kill
 * only once the dead holder's lease ended.
 */
export async function runDocumentCommit(
  server: FaultServer,
  options: DocumentCommitOptions = {},
): Promise<ScenarioOutcome> {
  const run = new DocumentRun(server, options.libDir);
  const expect = new Expectations();
  try {
    await run.prepare();
    const workers = await Promise.all(Array.from({ length: processes }, () => run.startWorker()));
    // Counted once every process is up: starting them takes seconds on a 2-core machine.
    const stopAt = sharedClockMs() + (options.durationMs ?? 17_000);
    for (const worker of workers) run.contend(worker, stopAt);
    const faults = await run.injectFaults(stopAt, expect);
    const stats = await run.finish();
    return await run.judge(stats, faults, expect);
  } finally {
    await run.stop();
  }
}

interface FaultLog {
  holderPauses: number;
  allPauses: number;
  kills: { worker: string; diedAt: number; deadline: number; takeoverAt: number | null }[];
}

class DocumentRun {
  readonly history = emptyHistory();
  readonly dbName = `faults_doccommit_${randomBytes(3).toString('hex')}`;
  private readonly admin: MongoClient;
  private readonly workers: Worker[] = [];
  private readonly commits: DocumentCommitEvent[] = [];
  private readonly acquisitions: DocumentAcquiredEvent[] = [];
  private acquiredListeners: ((event: DocumentAcquiredEvent) => void)[] = [];
  private spawned = 0;
  private readonly replacements: Promise<void>[] = [];

  constructor(
    private readonly server: FaultServer,
    private readonly libDir: string | undefined,
  ) {
    this.admin = new MongoClient(server.uri);
  }

  private get documents() {
    return this.admin
      .db(this.dbName)
      .collection<{ _id: string } & Record<string, unknown>>(collection);
  }

  async prepare(): Promise<void> {
    await this.documents.insertOne({ _id: documentId, counter: 0, commits: [] });
  }

  /** Forks a worker and starts its service. */
  async startWorker(): Promise<Worker> {
    const index = this.spawned++;
    const label = `doc${index}`;
    const process: WorkerProcess = IpcChild.fork(workerEntry, {
      label,
      env: this.libDir === undefined ? {} : { FAULT_LIB_DIR: path.resolve(this.libDir) },
      onEvent: (event: DocumentWorkerEvent) => this.onEvent(event),
    });
    const uri = `${this.server.uri}${this.server.uri.includes('?') ? '&' : '?'}appName=${label}`;
    const started = await process.call('start', {
      uri,
      dbName: this.dbName,
      collection,
      label,
      // Half the processes poll, half wait on the change stream.
      options: {
        ...(index % 2 === 1 ? polling : {}),
      },
    });
    if (this.libDir !== undefined && started.libDir !== path.resolve(this.libDir)) {
      await process.stop();
      throw new Error(`${label} loaded the library from ${started.libDir}, not ${this.libDir}`);
    }
    const worker: Worker = {
      label,
      process,
      holderId: started.holderId,
      pid: started.pid,
      killed: false,
      contended: Promise.resolve(null),
    };
    this.workers.push(worker);
    return worker;
  }

  /** Sets a worker locking and committing until `stopAt`. */
  contend(worker: Worker, stopAt: number): void {
    worker.contended = worker.process
      .call('contend', { id: documentId, ttlMs, workMinMs, workMaxMs, stopAt })
      .catch((error: unknown) => {
        if (worker.killed) return null;
        throw error;
      });
  }

  /** Arms (or disarms) every live worker's next section; see `DocumentAcquiredEvent.armed`. */
  private async arm(armed: boolean): Promise<void> {
    await Promise.all(
      this.liveWorkers().map((w) =>
        w.process.call('arm', { armed }).catch(() => ({ armed: false })),
      ),
    );
  }

  private onEvent(event: DocumentWorkerEvent): void {
    if (event.type === 'acquired') {
      this.acquisitions.push(event);
      // Open at once: a holder killed during its work never reports its end.
      this.history.sections.push({
        key: documentId,
        fence: event.fence,
        holder: event.holder,
        worker: event.worker,
        pid: event.pid,
        start: event.start,
        end: null,
        outcome: 'open',
        deadline: event.deadline,
        signalAt: null,
      });
      const listeners = this.acquiredListeners;
      this.acquiredListeners = [];
      for (const listener of listeners) listener(event);
      return;
    }
    this.commits.push(event);
    const section: SectionRecord = {
      key: documentId,
      fence: event.fence,
      holder: event.holder,
      worker: event.worker,
      pid: event.pid,
      start: event.start,
      // The commit is the holder's last act: from here on the server decides.
      end: event.commitCalledAt,
      outcome: event.outcome === 'committed' ? 'released' : 'lost',
      deadline: event.deadline,
      signalAt: event.signalAt,
    };
    const open = this.history.sections.findIndex(
      (s) => s.outcome === 'open' && s.holder === event.holder && s.fence === event.fence,
    );
    if (open >= 0) this.history.sections[open] = section;
    else this.history.sections.push(section);
  }

  /** The next acquisition reported from now on that `accept` takes, or `null` after `timeoutMs`. */
  private nextAcquired(
    accept: (event: DocumentAcquiredEvent) => boolean,
    timeoutMs: number,
  ): Promise<DocumentAcquiredEvent | null> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.acquiredListeners = this.acquiredListeners.filter((l) => l !== listener);
        resolve(null);
      }, timeoutMs);
      const listener = (event: DocumentAcquiredEvent) => {
        if (!accept(event)) {
          this.acquiredListeners.push(listener);
          return;
        }
        clearTimeout(timer);
        resolve(event);
      };
      this.acquiredListeners.push(listener);
    });
  }

  private liveWorkers(): Worker[] {
    return this.workers.filter((w) => !w.killed && w.process.alive);
  }

  private pause(worker: Worker): void {
    worker.process.signal('SIGSTOP');
    this.history.pauses.push({ pid: worker.pid, from: sharedClockMs(), to: null });
  }

  private resume(worker: Worker): void {
    const pause = this.history.pauses.find((p) => p.pid === worker.pid && p.to === null);
    if (!pause) throw new Error(`${worker.label} is not paused`);
    worker.process.signal('SIGCONT');
    pause.to = sharedClockMs();
  }

  /** Cycles through the faults, each aimed at a holder just granted, until near `stopAt`. */
  async injectFaults(stopAt: number, expect: Expectations): Promise<FaultLog> {
    const log: FaultLog = { holderPauses: 0, allPauses: 0, kills: [] };
    for (let i = 0; sharedClockMs() < stopAt - quietEndMs; i++) {
      await sleep(randomBetween(200, 600));
      const fault = cycle[i % cycle.length];
      // A holder to freeze must spin, not sleep, through its work: arm them all, take the first.
      if (fault !== 'kill') await this.arm(true);
      const waitFrom = sharedClockMs();
      const granted = await this.nextAcquired(
        (event) =>
          (fault === 'kill' || event.armed) && this.liveWorkers().some((w) => w.pid === event.pid),
        grantWaitMs,
      );
      if (!granted) {
        // The workers stop at `stopAt` (a last wait may still be granted a little after it):
        // only a wait that began well before the end finds them all idle.
        const waitedBeforeEnd = stopAt - waitFrom;
        expect.that(
          waitedBeforeEnd < quietEndMs / 2,
          documentId,
          `no process was granted the document for ${grantWaitMs / 1000} s (${fault})`,
        );
        break;
      }
      const holder = this.liveWorkers().find((w) => w.pid === granted.pid) as Worker;
      if (fault === 'kill') {
        log.kills.push(await this.killHolder(holder, granted, stopAt));
        continue;
      }
      const others = fault === 'pause-all' ? this.liveWorkers().filter((w) => w !== holder) : [];
      this.pause(holder);
      for (const other of others) this.pause(other);
      // Answered once they run again (the frozen ones after SIGCONT).
      const disarmed = this.arm(false);
      try {
        await sleep(
          granted.start + ttlMs + randomBetween(pastLeaseMinMs, pastLeaseMaxMs) - sharedClockMs(),
        );
      } finally {
        this.resume(holder);
        if (others.length > 0) await sleep(holderAloneMs);
        for (const other of others) this.resume(other);
      }
      await disarmed;
      if (fault === 'pause-all') log.allPauses += 1;
      else log.holderPauses += 1;
    }
    return log;
  }

  /** SIGKILL during the holder's work; a new process replaces it; someone must take over. */
  private async killHolder(
    holder: Worker,
    granted: DocumentAcquiredEvent,
    stopAt: number,
  ): Promise<FaultLog['kills'][number]> {
    holder.killed = true;
    holder.process.signal('SIGKILL');
    await holder.process.exited;
    const diedAt = sharedClockMs();
    this.history.deaths.push({ holder: holder.holderId, pid: holder.pid, diedAt });
    const takeover = this.nextAcquired(() => true, ttlMs + takeoverMarginMs);
    this.replacements.push(this.startWorker().then((worker) => this.contend(worker, stopAt)));
    const next = await takeover;
    return {
      worker: holder.label,
      diedAt,
      deadline: granted.deadline,
      takeoverAt: next?.start ?? null,
    };
  }

  /** Waits for every loop to end; returns the stats of the processes that lived. */
  async finish(): Promise<DocumentContendStats[]> {
    await Promise.all(this.replacements);
    const stats = await Promise.all(this.workers.map((w) => w.contended));
    return stats.filter((s): s is DocumentContendStats => s !== null);
  }

  async judge(
    stats: DocumentContendStats[],
    faults: FaultLog,
    expect: Expectations,
  ): Promise<ScenarioOutcome> {
    const errors = stats.flatMap((s) => s.errors);
    expect.that(
      errors.length === 0,
      documentId,
      `${errors.length} worker errors: ${errors.slice(0, 5).join('; ')}`,
    );

    const doc = await this.documents.findOne({ _id: documentId });
    const counter = Number(doc?.counter);
    const log = (doc?.commits ?? []) as CommitLogEntry[];
    const committed = this.commits.filter((c) => c.outcome === 'committed');

    // Every commit that landed is in the log, with the counter it saw at acquisition.
    expect.that(
      counter === log.length,
      documentId,
      `counter ${counter}, but ${log.length} commits in the log`,
    );
    const outOfOrder = log.findIndex((entry, index) => entry.seen !== index);
    expect.that(
      outOfOrder < 0,
      documentId,
      outOfOrder < 0
        ? ''
        : `commit #${outOfOrder} (${log[outOfOrder].worker}, fence ${log[outOfOrder].fence}) ` +
            `saw counter ${log[outOfOrder].seen}: it ran on a stale document (lost update)`,
    );
    const entryKey = (e: { pid: number; fence: string }) => `${e.pid}:${e.fence}`;
    const logged = new Map<string, number>();
    for (const entry of log) logged.set(entryKey(entry), (logged.get(entryKey(entry)) ?? 0) + 1);
    for (const [key, count] of logged) {
      expect.that(count === 1, documentId, `the commit of ${key} landed ${count} times`);
    }
    for (const commit of committed) {
      expect.that(
        logged.has(entryKey(commit)),
        documentId,
        `${commit.worker}'s commit (fence ${commit.fence}) resolved but is not in the document`,
      );
    }
    const killedPids = new Set(this.history.deaths.map((d) => d.pid));
    const resolvedKeys = new Set(committed.map(entryKey));
    const landedUnresolved = log.filter((entry) => !resolvedKeys.has(entryKey(entry)));
    for (const entry of landedUnresolved) {
      const byLostCommit = this.commits.find((c) => entryKey(c) === entryKey(entry));
      expect.that(
        killedPids.has(entry.pid) && byLostCommit === undefined,
        documentId,
        `${entry.worker}'s commit (fence ${entry.fence}) landed although ` +
          (byLostCommit ? `it rejected with ${byLostCommit.error}` : 'it never resolved'),
      );
    }
    expect.that(
      counter === committed.length + landedUnresolved.length,
      documentId,
      `counter ${counter}, but ${committed.length} commits resolved`,
    );

    // Late commits: called after a freeze that outlasted the holder's lease.
    let lateRefused = 0;
    let lateRefusedByServer = 0;
    for (const commit of this.commits) {
      const frozenPastLease = this.history.pauses.some(
        (p) =>
          p.pid === commit.pid &&
          p.from >= commit.start &&
          p.from <= commit.commitCalledAt &&
          p.to !== null &&
          p.to - commit.start > ttlMs + leaseCoverSlackMs,
      );
      if (!frozenPastLease) continue;
      if (commit.outcome === 'committed') {
        expect.that(
          false,
          documentId,
          `${commit.worker}'s commit (fence ${commit.fence}) landed although it was frozen ` +
            `past its lease before calling it (signal ${commit.abortedBeforeCall ? 'already' : 'not yet'} aborted)`,
        );
        continue;
      }
      expect.that(
        commit.error?.startsWith('LockLostError') === true,
        documentId,
        `${commit.worker}'s late commit (fence ${commit.fence}) rejected with ${commit.error}`,
      );
      lateRefused += 1;
      if (!commit.abortedBeforeCall) lateRefusedByServer += 1;
    }
    expect.that(lateRefused > 0, documentId, 'no late commit was tried: the freezes missed');
    expect.that(
      lateRefusedByServer > 0,
      documentId,
      'every late commit was refused locally (signal already aborted): the server check went untested',
    );

    for (const kill of faults.kills) {
      if (kill.takeoverAt === null) {
        expect.that(false, documentId, `nobody took over from ${kill.worker} after its SIGKILL`);
        continue;
      }
      expect.that(
        kill.takeoverAt >= kill.deadline,
        documentId,
        `${kill.worker}'s lock was granted again ${Math.round(kill.deadline - kill.takeoverAt)} ms ` +
          'before its lease could have ended',
      );
      expect.that(
        kill.takeoverAt - kill.diedAt <= ttlMs + takeoverMarginMs,
        documentId,
        `took ${Math.round(kill.takeoverAt - kill.diedAt)} ms to take over from ${kill.worker}`,
      );
    }

    this.history.finalLocks = await this.readFinalLock();
    const violations: Violation[] = [
      // A frozen process wakes on a loaded 2-core machine: allow its first timers 100 ms.
      ...checkHistory(this.history, {
        leaseMs: ttlMs,
        expiryMarginMs: takeoverMarginMs,
        signalLatenessToleranceMs: 100,
      }),
      ...expect.violations,
    ];
    const takeovers = faults.kills.map((k) =>
      k.takeoverAt === null ? 'none' : `${Math.round(k.takeoverAt - k.diedAt)} ms`,
    );
    return {
      operations: this.history.sections.length,
      violations,
      notes:
        `counter ${counter} = ${committed.length} commits resolved` +
        (landedUnresolved.length > 0 ? ` + ${landedUnresolved.length} by killed holders` : '') +
        ` (${this.commits.length - committed.length} rejected); ` +
        `${faults.holderPauses} holder freezes, ${faults.allPauses} freezes of all; ` +
        `${lateRefused} late commits refused (${lateRefusedByServer} by the server); ` +
        `${faults.kills.length} SIGKILLs (takeover ${takeovers.join(', ') || 'n/a'} after)`,
    };
  }

  /** The document's lock now: the first live entry of the line in its lock field, if any. */
  private async readFinalLock() {
    const [state] = await this.documents
      .aggregate<{ line?: LineEntry[]; now: Date }>([
        { $match: { _id: documentId } },
        { $project: { line: '$_lock.line', now: '$$NOW' } },
      ])
      .toArray();
    const observedAt = sharedClockMs();
    if (!state) return [];
    const [first] = liveEntries(state.line, state.now);
    return [{ key: documentId, holder: first?.h ?? null, held: first !== undefined, observedAt }];
  }

  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.process.stop('close')));
    await this.admin
      .db(this.dbName)
      .dropDatabase()
      .catch(() => undefined);
    await this.admin.close();
  }
}

/** The scenario on the library under test. */
export const documentCommit: Scenario = {
  name: 'document commit: 4 processes lock one document and $inc it under SIGSTOP and SIGKILL',
  run: (server) => runDocumentCommit(server),
};
