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
import { Expectations, scenarioViolation, sleep, type Scenario } from './scenario';

const processes = 3;
const workersPerProcess = 3;
const keys = ['wce:a', 'wce:b', 'wce:c'];
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

/** A write concern error added to the reply of a `findAndModify` that was applied. */
interface Variant {
  name: string;
  /** What the workers' command tallies show when it fired. */
  outcome: string;
  writeConcernError: Record<string, unknown>;
}

const variants: Variant[] = [
  {
    // Not retryable: the driver throws at once, the library sees an unknown outcome.
    name: 'WriteConcernFailed (64)',
    outcome: 'wce64',
    writeConcernError: {
      code: 64,
      codeName: 'WriteConcernFailed',
      errmsg: 'waiting for replication timed out',
      errInfo: { wtimeout: true },
    },
  },
  {
    // Retryable: the driver retries the write once (same transaction number).
    name: 'ShutdownInProgress (91)',
    outcome: 'wce91',
    writeConcernError: {
      code: 91,
      codeName: 'ShutdownInProgress',
      errmsg: 'Replication is being shut down',
    },
  },
];

/**
 * Write concern errors after the write: same shape as "repeated faults" (3 processes × 3
 * workers, 3 keys, leases of 1000, 1500 and 5000 ms, `timeoutMs` 3 s, `operationTimeoutMs` 1 s),
 * while `failCommand` adds a write concern error to 2 to 5 `findAndModify` replies in a row of
 * one worker at a time: the acquisition, renewal or release WAS applied, and its caller hears
 * of a failure. Code 64 (WriteConcernFailed, wtimeout) is not retried by the driver; code 91
 * (ShutdownInProgress) is, once. Workers retry unconfirmed releases (a release is idempotent).
 * Checks as in "repeated faults", and: no section reported lost by a false `LockLostError` on
 * release (lost inside its lease, untold before release, its signal aborted by `release()`
 * before its local deadline).
 */
export const writeConcernErrors: Scenario = {
  name: 'write concern errors after the write: 3 processes, failCommand times 2-5',
  async run(server) {
    const run = new FaultRun(server, 'wcefaults');
    const expect = new Expectations();
    try {
      const spawnedFrom = sharedClockMs();
      const workers = await run.spawn(
        Array.from({ length: processes }, (_, i) => ({
          label: `wce${i}`,
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
      for (const variant of variants) {
        expect.that(
          outcomeCount(tally, variant.outcome) > 0,
          '*',
          `${variant.name} never fired (armed ${armed.get(variant.name) ?? 0} times); ` +
            `commands seen: ${formatFaultTally(tally)}`,
        );
      }
      const lost = lostInsideLease(run.history.sections);
      // A release tried again after one whose outcome was unknown cannot tell whether that one
      // landed (docs/engine-v2.md: it reports LockLostError): counted, not a violation. A first
      // try that reports a loss inside the lease is one.
      const retriedLosses = lost.falseLockLost.filter((s) => (s.releaseTries ?? 1) > 1);
      const falseLosses = lost.falseLockLost
        .filter((s) => !retriedLosses.includes(s))
        .map((s) =>
          scenarioViolation(s.key, `false LockLostError on release: ${describeSection(s)}`),
        );
      const violations = await run.check({ leaseMs: longestTtlMs }, [
        ...expect.violations,
        ...falseLosses,
      ]);
      // Told by their deadline while the release was still unconfirmed: not a false loss.
      const atDeadline = lost.all.filter((s) => !lost.falseLockLost.includes(s));
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
          `${run.history.sections.filter((s) => (s.releaseTries ?? 1) > 1).length} releases retried`,
          `${lost.all.length} lost inside their lease: ${lost.falseLockLost.length} by ` +
            `LockLostError on release (${retriedLosses.length} of them on a retried release), ` +
            `${atDeadline.length} told at their deadline with the ` +
            `release unconfirmed` +
            (atDeadline.length > 0 ? ` (${atDeadline.map(describeSection).join('; ')})` : ''),
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

/** Arms the variants in turn, each at the next worker, until `until`; counts them by name. */
async function cycleFaults(
  run: FaultRun,
  workers: StartedWorker[],
  until: number,
): Promise<Map<string, number>> {
  const armed = new Map<string, number>();
  for (let k = 0; sharedClockMs() < until; k++) {
    const variant = variants[k % variants.length];
    const target = workers[(k + Math.floor(k / variants.length)) % workers.length];
    await run.failPoint(
      { times: randomInt(2, 5) },
      {
        failCommands: ['findAndModify'],
        writeConcernError: variant.writeConcernError,
        appName: target.label,
      },
    );
    armed.set(variant.name, (armed.get(variant.name) ?? 0) + 1);
    await sleep(Math.min(randomInt(400, 800), Math.max(0, until - sharedClockMs())));
  }
  await run.failPoint('off');
  return armed;
}
