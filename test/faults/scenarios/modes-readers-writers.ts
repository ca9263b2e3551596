import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { FaultServer } from '../../support/fault-server';
import {
  checkContention,
  countByKind,
  expectAllReported,
  settleWithin,
  sumStats,
  type Settled,
} from '../harness/contend-checks';
import { FaultRun, type StartedWorker, type WorkerSetup } from '../harness/fault-run';
import type { ModeMixEntry } from './modes-protocol';
import {
  checkModes,
  dumpHistory,
  findStalls,
  KeyStateSampler,
  modes,
  randomBetween,
  reports,
  waitFor,
  waitSpans,
} from './modes-run';
import { Expectations, sleep, type Scenario, type ScenarioOutcome } from './scenario';

const key = 'rw';
const ttlMs = 1200;
const timeoutMs = 6000;
/** Holds past the lease, unrenewed: the holder is told at its deadline while others wait. */
const pastLease = { longMinMs: ttlMs * 0.85, longMaxMs: ttlMs * 1.3 };
const polling = { changeStreams: 'off', pollIntervalMs: 25, maxPollIntervalMs: 100 };
/** Readers only ever take the key shared: a killed reader leaves only shared leases behind. */
const readerMix: ModeMixEntry[] = [
  {
    mode: 'shared',
    share: 1,
    renewShare: 0.3,
    hold: { shortMaxMs: 900, longShare: 0.1, ...pastLease },
  },
];
const writerMix: ModeMixEntry[] = [
  {
    mode: 'exclusive',
    share: 0.6,
    renewShare: 0.3,
    hold: { shortMaxMs: 120, longShare: 0.1, ...pastLease },
  },
  {
    mode: 'shared',
    share: 0.4,
    renewShare: 0.3,
    hold: { shortMaxMs: 250, longShare: 0.1, ...pastLease },
  },
];
/**
 * One worker per reader process, killed while it holds: a process killed while one of its
 * workers waits leaves its reservation (`waiting.<id>`) behind, which holds the exclusive
 * waiters back until it runs out (`RESERVATION_TTL_MS`, 10 s), as documented; with one worker
 * a holder has none (its grant dropped it).
 */
const readerWorkers = 1;
const writerWorkers = 3;
/**
 * How soon after the dead reader's lease ends a writer must take the key: the other shared
 * leases of that moment end within a lease (a waiting writer's reservation keeps new readers
 * out), plus the wake-up. A correctness bound, not a speed claim; the notes give the delays.
 */
const writerAfterKillBoundMs = 2 * ttlMs + 1000;
/**
 * Longest the key may stay free (no live lease) while callers wait for it: a waiter wakes when
 * the leases it saw end (the process on the change stream), or polls every 25 to 100 ms.
 */
const stallBoundMs = 1000;
/** No kill this close to the end: a writer must have time to take the key after it. */
const quietEndMs = 3000;

export interface ReadersWritersOptions {
  /** Library copy the workers load (`FAULT_LIB_DIR`): the mutants. */
  libDir?: string;
  /** How long the processes contend. Default 12 s. */
  durationMs?: number;
  /** Readers killed with SIGKILL while holding a shared lease (each replaced). Default 3. */
  kills?: number;
}

interface Kill {
  process: string;
  fences: string[];
  diedAt: number;
  /** No dead lease had ended before this: the latest local deadline seen at a grant. */
  leaseEndAtLeast: number;
  /**
   * Every dead lease had ended by this: unrenewed, its deadline at grant; renewed, a lease after
   * the kill.
   */
  leaseEndAtMost: number;
}

/**
 * Readers and writers on one key: 2 reader processes (shared only) and 2 writer processes (3
 * workers each, 60 % exclusive, 40 % shared), a share of them renewed, a share holding past
 * their lease unrenewed; half the processes poll, half wait on the change stream. Every 1.5 to
 * 2.5 s a reader process holding a shared lease is killed with SIGKILL, and a spare reader
 * (started with the others, idle until then) takes its place. Checked: the mode checker (no
 * exclusive interval overlaps any other, holders told before a conflicting grant, fences); no
 * exclusive grant before the dead reader's lease ended (nobody purges it), and a writer takes
 * the key after it; the key never stays free for more than 1 s while callers wait (the lock
 * document sampled every 50 ms); no worker error, every section reported, no lease left held.
 */
export async function runReadersWriters(
  server: FaultServer,
  options: ReadersWritersOptions = {},
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, 'modes_rw');
  const expect = new Expectations();
  const { libDir } = options;
  let sampler: KeyStateSampler | undefined;
  const setup = (label: string, index: number): WorkerSetup => ({
    label,
    libDir,
    options: index % 2 === 1 ? polling : undefined,
  });
  try {
    const killCount = options.kills ?? 3;
    // Spares are started now: starting a process mid-run would starve the others of CPU.
    const started = await run.spawn([
      ...[0, 1].map((i) => setup(`w${i}`, i)),
      ...Array.from({ length: 2 + Math.max(0, killCount - 1) }, (_, i) => setup(`r${i}`, i)),
    ]);
    const writers = started.slice(0, 2);
    const readers = started.slice(2, 4);
    const spares = started.slice(4);
    const stopAt = sharedClockMs() + (options.durationMs ?? 12_000);
    const calls = new Map<StartedWorker, Promise<Settled>>();
    const contend = (worker: StartedWorker, reader: boolean) =>
      calls.set(
        worker,
        settleWithin(
          modes(worker).call('contendModes', {
            key,
            workers: reader ? readerWorkers : writerWorkers,
            ttlMs,
            timeoutMs,
            mix: reader ? readerMix : writerMix,
            stopAt,
            maxSections: 2000,
            gapMaxMs: 30,
          }),
          stopAt + timeoutMs + ttlMs * 2 + 5000,
        ),
      );
    sampler = new KeyStateSampler(run, key);
    for (const r of readers) contend(r, true);
    for (const w of writers) contend(w, false);

    const kills: Kill[] = [];
    const killed = new Set<StartedWorker>();
    const live = [...readers];
    for (let i = 0; i < killCount; i++) {
      await sleep(randomBetween(1500, 2500));
      if (sharedClockMs() > stopAt - quietEndMs) break;
      // A reader process whose workers all hold a shared lease with time to go: none waits.
      const target = await waitFor(() => {
        const now = sharedClockMs();
        return live
          .map((w) => ({
            w,
            open: reports(run).filter((s) => s.pid === w.process.pid && s.outcome === 'open'),
          }))
          .find(
            ({ open }) =>
              open.length === readerWorkers &&
              open.every(
                (s) =>
                  (s.leaseEndAtGrant ?? 0) - now > 300 &&
                  (s.plannedHoldMs ?? 0) > now - s.start + 200,
              ),
          );
      }, 6000);
      if (!target) continue; // counted below
      const victim = target.w;
      killed.add(victim);
      live.splice(live.indexOf(victim), 1);
      const diedAt = await run.kill(victim);
      kills.push({
        process: victim.label,
        fences: target.open.map((s) => s.fence),
        diedAt,
        leaseEndAtLeast: Math.max(...target.open.map((s) => s.leaseEndAtGrant as number)),
        leaseEndAtMost: Math.max(
          ...target.open.map((s) => (s.renew ? diedAt + ttlMs : (s.leaseEndAtGrant as number))),
        ),
      });
      const spare = spares.shift();
      if (spare) {
        live.push(spare);
        contend(spare, true);
      }
    }
    const workers = [...calls.keys()].filter((w) => !killed.has(w));
    const results = await Promise.all(workers.map((w) => calls.get(w) as Promise<Settled>));
    const stats = checkContention(run, workers, results, expect, {
      timeoutMs,
      settleBoundMs: 2000,
    });
    const sections = reports(run);
    const ofLive = sections.filter((s) => !run.history.deaths.some((d) => d.pid === s.pid));
    expectAllReported(stats, workers.length, ofLive.length, expect);

    const delays: number[] = [];
    for (const kill of kills) {
      const exclusive = sections.filter((s) => s.mode === 'exclusive' && s.start > kill.diedAt);
      const early = exclusive.filter((s) => s.start < kill.leaseEndAtLeast);
      for (const s of early) {
        expect.that(
          false,
          key,
          `${s.worker} (fence ${s.fence}) was granted the key exclusively ` +
            `${Math.round(kill.leaseEndAtLeast - s.start)} ms before the leases of ` +
            `${kill.process} (fences ${kill.fences.join(', ')}), killed ` +
            `${Math.round(s.start - kill.diedAt)} ms before, ended`,
        );
      }
      const next = exclusive.reduce<number | null>(
        (first, s) => (first === null || s.start < first ? s.start : first),
        null,
      );
      if (next === null) {
        expect.that(false, key, `no writer took the key after ${kill.process} was killed`);
        continue;
      }
      delays.push(Math.round(next - kill.leaseEndAtLeast));
      expect.that(
        next - kill.leaseEndAtMost <= writerAfterKillBoundMs,
        key,
        `the first writer after ${kill.process} was killed took the key ` +
          `${Math.round(next - kill.leaseEndAtMost)} ms after its leases ended at the latest ` +
          `(bound ${writerAfterKillBoundMs} ms)`,
      );
    }
    expect.that(
      kills.length >= Math.min(killCount, 2),
      key,
      `only ${kills.length} of ${killCount} kills made: no reader held a shared lease long enough`,
    );
    const samples = await sampler.stop();
    const failedCalls = stats.flatMap((s) => s.failedCalls ?? []);
    const stalls = findStalls(key, samples, waitSpans(sections, failedCalls), stallBoundMs);
    const violations = await checkModes(run, { leaseMs: ttlMs }, [...expect.violations, ...stalls]);
    dumpHistory(run, { kills, stats, samples });
    const exclusiveCount = sections.filter((s) => s.mode === 'exclusive').length;
    return {
      operations: sections.length,
      violations,
      notes:
        `${exclusiveCount} exclusive and ${sections.length - exclusiveCount} shared sections, ` +
        `${sumStats(stats, 'lost')} lost their lease, ${sumStats(stats, 'timeouts')} timeouts; ` +
        `${kills.length} readers killed, first writer ${delays.join(', ') || '-'} ms after ` +
        `the dead lease; violations: ${countByKind(violations)}`,
    };
  } finally {
    await sampler?.stop();
    await run.stop();
  }
}

export const modesReadersWriters: Scenario = {
  name: 'a. readers/writers: 4 processes, shared and exclusive on one key, readers SIGKILLed',
  run: (server) => runReadersWriters(server),
};
