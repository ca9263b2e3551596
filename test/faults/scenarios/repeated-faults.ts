import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { ContendArgs } from '../../support/fault-protocol';
import {
  checkContention,
  countByKind,
  describeSection,
  expectAllReported,
  formatFaultTally,
  lostInsideLease,
  maxOvershoot,
  outcomeCount,
  randomInt,
  settleWithin,
  sumStats,
  sumTallies,
} from '../harness/contend-checks';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import { orphanBoundMs } from '../history/orphans';
import { Expectations, sleep, type Scenario } from './scenario';

const processes = 3;
const workersPerProcess = 3;
const keys = ['rep:a', 'rep:b', 'rep:c'];
/**
 * Leases of 1000 and 1500 ms meet on the same keys; the third process leases for 5000 ms: an
 * orphaned lease ends by itself after one lease, so only one longer than the orphan bound
 * (`orphanBoundMs`, 2500 ms here) shows whether unknown outcomes are given back.
 */
const ttls = [1000, 1500, 5000];
const longestTtlMs = 5000;
/** Holds are drawn against at most this lease, so the long leases do not hog the keys. */
const holdLeaseMs = 1500;
const timeoutMs = 3000;
/** The module option: the longest one lock command may take. */
const operationTimeoutMs = 1000;
/** An acquisition must settle by its `timeoutMs` plus this. */
const settleBoundMs = operationTimeoutMs + 1000;
const faultPhaseMs = 9000;
/** Contention goes on this long without faults after the last one. */
const cleanTailMs = 1000;
/** A blocked command is held this much longer than `operationTimeoutMs`, then runs. */
const blockPastTimeoutMs = 400;

/** One repeated `failCommand` on `findAndModify` (acquire, renew and release alike). */
interface Fault {
  name: string;
  /** What the workers' command tallies show when it fired. */
  outcome: string;
  data: (appName: string) => Record<string, unknown>;
  /** How long to leave it armed before the next one replaces it. */
  armedMs: () => number;
}

const faults: Fault[] = [
  {
    // The connection closes before the command runs: the driver retries once, on a new one.
    name: 'closeConnection',
    outcome: 'network',
    data: (appName) => ({ failCommands: ['findAndModify'], closeConnection: true, appName }),
    armedMs: () => randomInt(500, 800),
  },
  {
    // A retryable error reply before the write (the driver retries once).
    name: 'ShutdownInProgress (91)',
    outcome: 'error91',
    data: (appName) => ({ failCommands: ['findAndModify'], errorCode: 91, appName }),
    armedMs: () => randomInt(400, 700),
  },
  {
    name: 'PrimarySteppedDown (189)',
    outcome: 'error189',
    data: (appName) => ({ failCommands: ['findAndModify'], errorCode: 189, appName }),
    armedMs: () => randomInt(400, 700),
  },
  {
    // Held past operationTimeoutMs, then run: the caller gave up, the write happens later.
    name: 'blockConnection',
    outcome: 'slow',
    data: (appName) => ({
      failCommands: ['findAndModify'],
      blockConnection: true,
      blockTimeMS: operationTimeoutMs + blockPastTimeoutMs,
      appName,
    }),
    armedMs: () => operationTimeoutMs + blockPastTimeoutMs + randomInt(200, 500),
  },
];

/**
 * Repeated faults: 3 processes × 3 workers contend on 3 keys (leases of 1000, 1500 and 5000 ms,
 * half renewed, a quarter of the holds long enough to renew; `timeoutMs` 3 s,
 * `operationTimeoutMs` 1 s) while the parent arms `failCommand` on `findAndModify` for 2 to 4 times in a row,
 * aimed at one worker's connections, cycling through closed connections,
 * ShutdownInProgress, PrimarySteppedDown and commands held past `operationTimeoutMs`. With
 * `times` > 1 the driver's single retry fails too, so the library sees the fault. The workers
 * tally how their commands ended, which shows each fault fired and on what (acquire, renew,
 * release). Checks: the history checker, no orphaned lease (sampled), no worker error but the
 * library's typed ones, every acquisition settled by `timeoutMs + operationTimeoutMs + 1 s`.
 */
export const repeatedFaults: Scenario = {
  name: 'repeated faults: failCommand times 2-4 on one worker at a time, 3 processes',
  async run(server) {
    const run = new FaultRun(server, 'repfaults');
    const expect = new Expectations();
    try {
      const spawnedFrom = sharedClockMs();
      const workers = await run.spawn(
        Array.from({ length: processes }, (_, i) => ({
          label: `rep${i}`,
          options: { operationTimeoutMs },
          monitorCommands: { slowMs: operationTimeoutMs },
        })),
      );
      const spawnMs = sharedClockMs() - spawnedFrom;
      run.sampleLeases({ boundMs: orphanBoundMs(operationTimeoutMs) });
      const faultsEndAt = sharedClockMs() + faultPhaseMs;
      const stopAt = faultsEndAt + cleanTailMs;
      const contention = workers.map((w, i) =>
        settleWithin(w.process.call('contend', contendArgs(i, stopAt)), stopAt + 15_000),
      );
      const armed = await cycleFaults(run, workers, faultsEndAt);
      const results = await Promise.all(contention);

      const stats = checkContention(run, workers, results, expect, {
        timeoutMs,
        settleBoundMs,
      });
      expectAllReported(stats, processes, run.history.sections.length, expect);
      const tally = sumTallies(
        await Promise.all(workers.map((w) => w.process.call('commandTally', {}))),
      );
      for (const fault of faults) {
        expect.that(
          outcomeCount(tally, fault.outcome) > 0,
          '*',
          `${fault.name} never fired (armed ${armed.get(fault.name) ?? 0} times); ` +
            `commands seen: ${formatFaultTally(tally)}`,
        );
      }
      const violations = await run.check({ leaseMs: longestTtlMs }, expect.violations);
      const lost = lostInsideLease(run.history.sections);
      return {
        operations: run.history.sections.length,
        violations,
        notes: [
          `${[...armed.values()].reduce((a, b) => a + b, 0)} faults armed`,
          `failed or slow commands: ${formatFaultTally(tally)}`,
          `${sumStats(stats, 'lost')} lost`,
          `${sumStats(stats, 'timeouts')} timeouts`,
          `${sumStats(stats, 'unavailable')} unavailable`,
          `max overshoot ${maxOvershoot(stats)} ms`,
          `${lost.all.length} lost inside their lease (${lost.falseLockLost.length} by a ` +
            `false LockLostError on release)${lost.all.length > 0 ? `: ${lost.all.map(describeSection).join('; ')}` : ''}`,
          run.leaseSamplingNotes(),
          `workers started in ${(spawnMs / 1000).toFixed(1)} s`,
          `violations: ${countByKind(violations)}`,
        ].join('; '),
      };
    } finally {
      await run.stop();
    }
  },
};

function contendArgs(index: number, stopAt: number): ContendArgs {
  const ttlMs = ttls[index % ttls.length];
  const holdMs = Math.min(ttlMs, holdLeaseMs);
  return {
    keys,
    workers: workersPerProcess,
    ttlMs,
    timeoutMs,
    hold: { shortMaxMs: 20, longShare: 0.25, longMinMs: holdMs * 0.4, longMaxMs: holdMs * 1.3 },
    renewShare: 0.5,
    retryUnconfirmedRelease: true,
    stopAt,
    maxSections: 2000,
  };
}

/** Arms the faults in turn, each at the next worker, until `until`; counts them by name. */
async function cycleFaults(
  run: FaultRun,
  workers: StartedWorker[],
  until: number,
): Promise<Map<string, number>> {
  const armed = new Map<string, number>();
  for (let k = 0; sharedClockMs() < until; k++) {
    const fault = faults[k % faults.length];
    // Every worker meets every kind: the target moves on once per round of kinds, plus one.
    const target = workers[(k + Math.floor(k / faults.length)) % workers.length];
    await run.failPoint({ times: randomInt(2, 4) }, fault.data(target.label));
    armed.set(fault.name, (armed.get(fault.name) ?? 0) + 1);
    await sleep(Math.min(fault.armedMs(), Math.max(0, until - sharedClockMs())));
  }
  await run.failPoint('off');
  return armed;
}
