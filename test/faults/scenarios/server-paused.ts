import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { ContendStats } from '../../support/fault-protocol';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import type { Violation } from '../history/history';
import { orphanBoundMs } from '../history/orphans';
import { settleWithin } from '../harness/contend-checks';
import { Expectations, sleep, type Scenario } from './scenario';

const processes = 3;
const workersPerProcess = 3;
const keys = ['stall:a', 'stall:b'];
const ttlMs = 1500;
const timeoutMs = 3000;
/** The module option: the longest one lock command may take. */
const operationTimeoutMs = 900;
/** An acquisition must settle by its `timeoutMs` plus this. */
const settleBoundMs = operationTimeoutMs + 1000;
/** Server pauses: shorter than the lease, then longer. */
const pauses = [
  { name: 'short', ms: 600 },
  { name: 'long', ms: 3500 },
];
/** Contention before the first pause, between pauses, and after the last one. */
const warmUpMs = 1000;
const betweenMs = 1500;
const recoveryMs = 2500;
/** Past the end of the contention, a worker still contending counts as stuck. */
const stuckAfterMs = 15_000;

/**
 * The server stops answering: its process is frozen with SIGSTOP (connections stay open,
 * nothing is answered) for 600 ms, shorter than the 1.5 s lease, and later for 3.5 s, longer
 * than it, while 3 processes × 3 workers contend on 2 keys, half of the acquisitions renewed,
 * with `operationTimeoutMs` 900 ms. Besides the checker (no overlap; holders are told at their
 * local deadline, a timer in their own process, so never late): every acquisition settles by
 * its timeout + `operationTimeoutMs` + 1 s; the only failures are `LockStoreUnavailableError`
 * (counted as unavailable) and timeouts; after SIGCONT every process completes sections
 * again; no lock is left held at the end, and no lease lives on that no section accounts for
 * (the lease sampler). Needs the offline server (a process it can signal):
 * with MONGODB_URI it is skipped, and says so in its row.
 */
export const serverPaused: Scenario = {
  name: 'server stops answering (SIGSTOP on the server, shorter and longer than the lease)',
  async run(server) {
    const signal = server.signal;
    if (!signal) {
      return {
        operations: 0,
        violations: [],
        notes: 'skipped: the server is MONGODB_URI, not a process this suite can SIGSTOP',
      };
    }
    const run = new FaultRun(server, 'srvpause');
    const expect = new Expectations();
    let frozen = false;
    try {
      const workers = await run.spawn(
        Array.from({ length: processes }, (_, i) => ({
          label: `stall${i}`,
          options: { operationTimeoutMs },
        })),
      );
      run.sampleLeases({ boundMs: orphanBoundMs(operationTimeoutMs) });
      const startedAt = sharedClockMs();
      const pausedMs = pauses.reduce((sum, p) => sum + p.ms, 0);
      const stopAt = startedAt + warmUpMs + pausedMs + betweenMs + recoveryMs;
      const contention = workers.map((w) =>
        settleWithin(
          w.process.call('contend', {
            keys,
            workers: workersPerProcess,
            ttlMs,
            timeoutMs,
            hold: { shortMaxMs: 100, longShare: 0.1, longMinMs: 1200, longMaxMs: 2000 },
            renewShare: 0.5,
            stopAt,
            maxSections: 2000,
          }),
          stopAt + stuckAfterMs,
        ),
      );
      const windows: { name: string; from: number; to: number }[] = [];
      await sleep(warmUpMs);
      for (const [i, pause] of pauses.entries()) {
        if (i > 0) await sleep(betweenMs);
        frozen = true;
        signal('SIGSTOP');
        const from = sharedClockMs();
        await sleep(pause.ms);
        signal('SIGCONT');
        frozen = false;
        windows.push({ name: pause.name, from, to: sharedClockMs() });
      }
      const results = await Promise.all(contention);
      const resumedAt = windows[windows.length - 1].to;

      const stats: ContendStats[] = [];
      for (const [i, result] of results.entries()) {
        const worker = workers[i];
        if ('failure' in result) {
          expect.that(false, '*', `${worker.label}: ${result.failure}`);
          continue;
        }
        stats.push(result.stats);
        checkWorker(run, worker, result.stats, resumedAt, expect);
      }
      const sections = stats.reduce((sum, s) => sum + s.sections, 0);
      if (stats.length === processes) {
        expect.that(
          run.history.sections.length === sections,
          '*',
          `${sections} sections counted, ${run.history.sections.length} reported`,
        );
      }
      const violations = await run.check({ leaseMs: ttlMs }, expect.violations);
      return {
        operations: run.history.sections.length,
        violations,
        notes: summarize(run, stats, windows, violations),
      };
    } finally {
      // Never leave the suite's one server frozen.
      if (frozen) signal('SIGCONT');
      await run.stop();
    }
  },
};

function checkWorker(
  run: FaultRun,
  worker: StartedWorker,
  stats: ContendStats,
  resumedAt: number,
  expect: Expectations,
): void {
  expect.that(
    stats.errors.length === 0,
    '*',
    `${worker.label}: ${stats.errors.length} failures other than LockStoreUnavailableError ` +
      `or a timeout: ${stats.errors.join('; ')}`,
  );
  expect.that(
    stats.maxSettleOvershootMs <= settleBoundMs,
    '*',
    `${worker.label}: an acquisition settled ${Math.round(stats.maxSettleOvershootMs)} ms after ` +
      `its timeoutMs (${timeoutMs} ms); bound operationTimeoutMs + 1000 = ${settleBoundMs} ms`,
  );
  const after = run.history.sections.filter(
    (s) => s.holder === worker.holderId && s.start > resumedAt,
  ).length;
  expect.that(
    after > 0,
    '*',
    `${worker.label} completed no section after the server answered again`,
  );
}

function summarize(
  run: FaultRun,
  stats: ContendStats[],
  windows: { name: string; from: number; to: number }[],
  violations: Violation[],
): string {
  const sum = (f: (s: ContendStats) => number) => stats.reduce((n, s) => n + f(s), 0);
  const overshoot = Math.max(...stats.map((s) => s.maxSettleOvershootMs));
  const lostIn = windows.map((w) => {
    const lost = run.history.sections.filter(
      (s) => s.outcome === 'lost' && s.signalAt !== null && s.signalAt >= w.from,
    );
    const inWindow = lost.filter((s) => (s.signalAt ?? 0) <= w.to + ttlMs).length;
    return `${w.name} pause ${Math.round(w.to - w.from)} ms: ${inWindow} told of a loss`;
  });
  const kinds = new Map<string, number>();
  for (const v of violations) kinds.set(v.kind, (kinds.get(v.kind) ?? 0) + 1);
  return [
    ...lostIn,
    `${sum((s) => s.sections)} sections`,
    `${sum((s) => s.lost)} lost`,
    `${sum((s) => s.unavailable)} unavailable`,
    `${sum((s) => s.timeouts)} timeouts`,
    `${sum((s) => s.errors.length)} errors`,
    `max overshoot ${Math.round(overshoot)} ms`,
    `violations: ${kinds.size === 0 ? 'none' : [...kinds].map(([k, n]) => `${n} ${k}`).join(', ')}`,
    run.leaseSamplingNotes(),
  ].join('; ');
}
