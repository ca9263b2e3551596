import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { ContendArgs } from '../../support/fault-protocol';
import {
  checkContention,
  countByKind,
  expectAllReported,
  maxOvershoot,
  randomInt,
  settleWithin,
  sumStats,
} from '../harness/contend-checks';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import type { SectionRecord } from '../history/history';
import { orphanBoundMs } from '../history/orphans';
import { Expectations, sleep, type Scenario } from './scenario';

const processes = 3;
const workersPerProcess = 3;
const keys = ['revoke:a', 'revoke:b'];
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
const operationTimeoutMs = 1000;
const settleBoundMs = operationTimeoutMs + 1000;
/** How long the parent keeps calling `releaseAllHeld()`. */
const revokePhaseMs = 8000;
const cleanTailMs = 500;
/** A lock revoked with this much lease left was surely given back while live. */
const liveMarginMs = 300;

interface RevokeCall {
  worker: StartedWorker;
  calledAt: number;
  settledAt: number;
  released: number;
}

/**
 * `releaseAllHeld()` concurrent with acquisitions: 3 processes × 3 workers contend on 2 keys
 * (leases of 1000, 1500 and 5000 ms, waits of up to 3 s, holds of 0–20 ms and a fifth of them
 * from 0.3 to 1.2 times the lease (at most 1500 ms), half renewed), while the parent calls `releaseAllHeld()` on a random process every 100–300 ms for
 * 8 s. A revoked holder must be told (signal) before its lock is released, so the checker must
 * see no overlap and no late notice; no lease may be left orphaned (sampled), no worker fail,
 * and every acquisition settle by `timeoutMs + operationTimeoutMs + 1 s`.
 */
export const releaseAllHeld: Scenario = {
  name: 'releaseAllHeld concurrent with acquisitions: 3 processes, 2 keys',
  async run(server) {
    const run = new FaultRun(server, 'revoke');
    const expect = new Expectations();
    try {
      const spawnedFrom = sharedClockMs();
      const workers = await run.spawn(
        Array.from({ length: processes }, (_, i) => ({
          label: `revoke${i}`,
          options: { operationTimeoutMs },
        })),
      );
      const spawnMs = sharedClockMs() - spawnedFrom;
      run.sampleLeases({ boundMs: orphanBoundMs(operationTimeoutMs) });
      const revokeUntil = sharedClockMs() + revokePhaseMs;
      const stopAt = revokeUntil + cleanTailMs;
      const contention = workers.map((w, i) =>
        settleWithin(w.process.call('contend', contendArgs(i, stopAt)), stopAt + 15_000),
      );
      const calls = await revokeRepeatedly(workers, revokeUntil, expect);
      const results = await Promise.all(contention);

      const stats = checkContention(run, workers, results, expect, {
        timeoutMs,
        settleBoundMs,
      });
      expectAllReported(stats, processes, run.history.sections.length, expect);
      const released = calls.reduce((sum, c) => sum + c.released, 0);
      const revoked = revokedSections(run.history.sections, calls);
      expect.that(
        revoked.length > 0,
        '*',
        `no section was revoked in ${calls.length} releaseAllHeld() calls: the scenario probed nothing`,
      );
      // Told by the call with lease to spare, they were given back while live: the calls'
      // counts ("how many keys were released while their lease was live") must include them.
      const surelyLive = revoked.filter(
        (s) => s.signalAt !== null && s.deadline !== null && s.deadline - s.signalAt > liveMarginMs,
      );
      expect.that(
        released >= surelyLive.length,
        '*',
        `releaseAllHeld() calls reported ${released} locks released while live, but ` +
          `${surelyLive.length} sections were revoked by them with more than ${liveMarginMs} ms ` +
          `of lease left (their holders called release() on the abort, as the contention ` +
          `loop does)`,
      );
      const violations = await run.check({ leaseMs: longestTtlMs }, expect.violations);
      return {
        operations: run.history.sections.length,
        violations,
        notes: [
          `${calls.length} releaseAllHeld() calls released ${released} live locks`,
          `${revoked.length} sections told of a loss during a call (${surelyLive.length} with ` +
            `lease to spare)`,
          `${sumStats(stats, 'lost')} lost`,
          `${sumStats(stats, 'timeouts')} timeouts`,
          `${sumStats(stats, 'unavailable')} unavailable`,
          `max overshoot ${maxOvershoot(stats)} ms`,
          `longest call ${Math.round(Math.max(0, ...calls.map((c) => c.settledAt - c.calledAt)))} ms`,
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
    hold: { shortMaxMs: 20, longShare: 0.2, longMinMs: holdMs * 0.3, longMaxMs: holdMs * 1.2 },
    renewShare: 0.5,
    stopAt,
    maxSections: 2000,
  };
}

/** Calls `releaseAll` on a random worker every 100–300 ms until `until`. */
async function revokeRepeatedly(
  workers: StartedWorker[],
  until: number,
  expect: Expectations,
): Promise<RevokeCall[]> {
  const calls: RevokeCall[] = [];
  const pending: Promise<void>[] = [];
  while (sharedClockMs() < until) {
    const worker = workers[randomInt(0, workers.length - 1)];
    // Not awaited: a slow call must not hold back the next one on another process.
    pending.push(
      worker.process.call('releaseAll', {}).then(
        (result) => void calls.push({ worker, ...result }),
        (error: unknown) =>
          expect.that(false, '*', `${worker.label}: releaseAll failed: ${String(error)}`),
      ),
    );
    await sleep(randomInt(100, 300));
  }
  await Promise.all(pending);
  return calls;
}

/**
 * Sections told by a `releaseAllHeld()` call: their signal aborted while a call in their
 * process was running, and before their work ended (not while releasing on their own).
 */
function revokedSections(sections: SectionRecord[], calls: RevokeCall[]): SectionRecord[] {
  return sections.filter((s) => {
    const signalAt = s.signalAt;
    if (signalAt === null || s.end === null || signalAt > s.end) return false;
    return calls.some(
      (c) => c.worker.process.pid === s.pid && c.calledAt <= signalAt && signalAt <= c.settledAt,
    );
  });
}
