import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { FaultServer } from '../../support/fault-server';
import {
  checkContention,
  countByKind,
  expectAllReported,
  settleWithin,
  sumStats,
} from '../harness/contend-checks';
import { FaultRun } from '../harness/fault-run';
import type { PauseRecord } from '../history/history';
import type { ModeSectionReport, ModeMixEntry } from './modes-protocol';
import {
  checkModes,
  dumpHistory,
  findStalls,
  KeyStateSampler,
  modes,
  randomBetween,
  reports,
  waitForReport,
  waitSpans,
} from './modes-run';
import { Expectations, sleep, type Scenario, type ScenarioOutcome } from './scenario';

const key = 'sem';
const permits = 3;
const ttlMs = 1000;
const timeoutMs = 6000;
const processes = 4;
const workersPerProcess = 3;
const polling = { changeStreams: 'off', pollIntervalMs: 25, maxPollIntervalMs: 100 };
const hold = {
  shortMaxMs: 250,
  longShare: 0.1,
  longMinMs: ttlMs * 0.85,
  longMaxMs: ttlMs * 1.3,
};
const mix: ModeMixEntry[] = [
  { permits, weight: 1, share: 0.6, renewShare: 0.3, hold },
  { permits, weight: 2, share: 0.4, renewShare: 0.3, hold },
];
/** How long past its lease a frozen holder stays frozen. */
const pastLeaseMinMs = 300;
const pastLeaseMaxMs = 700;
/** A thawed holder must be told (or have stopped) this soon after SIGCONT: its timers are due. */
const thawNoticeMs = 100;
/**
 * Longest the key may stay free while callers wait, away from freezes: a frozen process's
 * reservation may hold the others back until it runs again.
 */
const stallBoundMs = 1000;
/** No freeze this close to the end. */
const quietEndMs = 2500;

export interface SemaphoreOptions {
  libDir?: string;
  /** How long the processes contend. Default 12 s. */
  durationMs?: number;
  /** Permit holders frozen with SIGSTOP past their lease. Default 4. */
  pauses?: number;
}

interface Freeze {
  section: ModeSectionReport;
  pause: PauseRecord;
}

/**
 * A semaphore of 3 permits on one key: 4 processes × 3 workers take 1 or 2 permits (a share
 * renewed, a share holding past the lease unrenewed); half the processes poll. Every 1 to 2 s
 * the process of a permit holder just granted is frozen with SIGSTOP until 300 to 700 ms past
 * the lease it could have had, then thawed. Checked: the mode checker (at every instant at most
 * 3 permits held, counted by weight; a holder told before a grant that needed its permits;
 * fences), each frozen holder reports the loss and is told within 100 ms of SIGCONT, the
 * permits of frozen holders went to others meanwhile (at least once in the run), and away from
 * freezes the key never stays free for more than 1 s while callers wait.
 */
export async function runSemaphore(
  server: FaultServer,
  options: SemaphoreOptions = {},
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, 'modes_sem');
  const expect = new Expectations();
  let sampler: KeyStateSampler | undefined;
  try {
    const workers = await run.spawn(
      Array.from({ length: processes }, (_, i) => ({
        label: `s${i}`,
        libDir: options.libDir,
        options: i % 2 === 1 ? polling : undefined,
      })),
    );
    const stopAt = sharedClockMs() + (options.durationMs ?? 12_000);
    sampler = new KeyStateSampler(run, key);
    const calls = workers.map((w) =>
      settleWithin(
        modes(w).call('contendModes', {
          key,
          workers: workersPerProcess,
          ttlMs,
          timeoutMs,
          mix,
          stopAt,
          maxSections: 2000,
          gapMaxMs: 30,
        }),
        stopAt + timeoutMs + ttlMs * 2 + 5000,
      ),
    );

    const freezes: Freeze[] = [];
    for (let i = 0; i < (options.pauses ?? 4); i++) {
      await sleep(randomBetween(1000, 2000));
      if (sharedClockMs() > stopAt - quietEndMs) break;
      const since = sharedClockMs();
      // A holder just granted, with work to do: 2 permits when one comes soon, else any.
      const wide = (s: ModeSectionReport) =>
        s.outcome === 'open' &&
        s.start >= since &&
        (s.plannedHoldMs ?? 0) >= 150 &&
        (i % 2 === 1 || (s.weight ?? 1) === 2);
      const target =
        (await waitForReport(run, wide, 1500)) ??
        (await waitForReport(
          run,
          (s) => s.outcome === 'open' && s.start >= since && (s.plannedHoldMs ?? 0) >= 150,
          3000,
        ));
      if (!target) continue; // counted below
      const worker = workers.find((w) => w.process.pid === target.pid);
      if (!worker) continue;
      const from = run.pause(worker);
      await sleep(ttlMs + randomBetween(pastLeaseMinMs, pastLeaseMaxMs));
      run.resume(worker);
      const pause = run.history.pauses[run.history.pauses.length - 1];
      freezes.push({ section: target, pause: { ...pause, from } });
    }

    const results = await Promise.all(calls);
    const stats = checkContention(run, workers, results, expect, {
      timeoutMs,
      settleBoundMs: 2000,
    });
    const sections = reports(run);
    expectAllReported(stats, workers.length, sections.length, expect);
    let regranted = 0;
    for (const { section: frozen, pause } of freezes) {
      const final = sections.find(
        (s) => s.pid === frozen.pid && s.fence === frozen.fence && s.key === key,
      );
      const to = pause.to as number;
      if (!final || final.outcome === 'open') {
        expect.that(false, key, `${frozen.worker} (fence ${frozen.fence}), frozen, never reported`);
        continue;
      }
      const untold = Math.min(final.end ?? Infinity, final.signalAt ?? Infinity);
      expect.that(
        final.outcome === 'lost' && untold <= to + thawNoticeMs,
        key,
        `${final.worker} (fence ${final.fence}), frozen past its lease, ended ${final.outcome}, ` +
          `told or stopped ${Math.round(untold - to)} ms after SIGCONT`,
      );
      // Its permits went to others while it was frozen: at some grant after its deadline,
      // the others held more than the permits left beside it.
      const deadline = final.deadline ?? to;
      const others = sections.filter((s) => s !== final);
      const tookItsPermits = others.some((g) => {
        if (g.start <= deadline || g.start >= to) return false;
        const held = others.filter(
          (s) =>
            s.start <= g.start && Math.min(s.end ?? Infinity, s.deadline ?? Infinity) > g.start,
        );
        return held.reduce((sum, s) => sum + (s.weight ?? 1), 0) > permits - (final.weight ?? 1);
      });
      if (tookItsPermits) regranted += 1;
    }
    const pausesMade = freezes.length;
    expect.that(
      pausesMade >= Math.min(options.pauses ?? 4, 2),
      key,
      `only ${pausesMade} holders frozen: none was granted with work to do`,
    );
    expect.that(
      pausesMade === 0 || regranted > 0,
      key,
      'no frozen holder’s permits went to another holder: the freezes probed nothing',
    );
    const samples = await sampler.stop();
    const failedCalls = stats.flatMap((s) => s.failedCalls ?? []);
    const frozen = run.history.pauses.map((p) => ({
      from: p.from,
      to: (p.to ?? Infinity) + stallBoundMs,
    }));
    const stalls = findStalls(key, samples, waitSpans(sections, failedCalls), stallBoundMs, frozen);
    const violations = await checkModes(run, { leaseMs: ttlMs }, [...expect.violations, ...stalls]);
    dumpHistory(run, { stats, samples });
    const wide = sections.filter((s) => s.weight === 2).length;
    return {
      operations: sections.length,
      violations,
      notes:
        `${sections.length - wide} sections of 1 permit, ${wide} of 2; ` +
        `${sumStats(stats, 'lost')} lost their lease, ${sumStats(stats, 'timeouts')} timeouts; ` +
        `${pausesMade} holders frozen past their lease, ${regranted} of them had their permits ` +
        `taken meanwhile; violations: ${countByKind(violations)}`,
    };
  } finally {
    await sampler?.stop();
    await run.stop();
  }
}

export const modesSemaphore: Scenario = {
  name: 'b. semaphore: 3 permits, weights 1 and 2, 4 processes x 3 workers, holders SIGSTOPped',
  run: (server) => runSemaphore(server),
};
