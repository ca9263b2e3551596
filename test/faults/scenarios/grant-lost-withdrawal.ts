import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { HeldLock } from '../../support/fault-protocol';
import type { FaultServer } from '../../support/fault-server';
import { countByKind } from '../harness/contend-checks';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import { orphanBoundMs } from '../history/orphans';
import {
  GRANT_LEASE_MS,
  GrantSampler,
  poll,
  SAMPLE_SLACK_MS,
  type GrantSample,
  type GrantScenario,
} from './grant-run';
import { dumpHistory } from './modes-run';
import { Expectations, sleep, type ScenarioOutcome } from './scenario';

/** The holder's lease: long, so nobody wakes at its end (it is released early). */
const holderTtlMs = 20_000;
/** The leaver gives up this soon after calling `acquire`. */
const leaverTimeoutMs = 1500;
/** The waiter's lease once it holds (unrenewed; it holds 100 ms). */
const waiterTtlMs = 5000;
/**
 * The waiter waits long: a stale place granted the key would cost it the grant lease, and
 * the scenario measures that instead of seeing a timeout.
 */
const waiterTimeoutMs = 20_000;
/**
 * After the holder's release (or after the last failed withdrawal, if that came later), the
 * waiter has the key within this: a release that grants the key to the leaver's stale place
 * keeps the waiter waiting for that grant's lease (`GRANT_LEASE_MS`, 5 s) at least.
 */
const handOverBoundMs = 1500 + SAMPLE_SLACK_MS;
/** The withdrawal's failures must all have fired within this after the leaver gave up. */
const faultBudgetMs = 4000;
/** The leaver's place leaves the line within this after its last failed withdrawal. */
const placeGoneBoundMs = 2000;

/**
 * When the holder releases, in a round:
 * - `after-withdrawal`: once the fail point has fired all its `times` and the leaver's place
 *   has left the line (the retried withdrawal landed): the release must grant the waiter.
 *   Were the withdrawal lost, the release would grant the leaver's stale place.
 * - `at-once`: as soon as the leaver's call gave up, while its withdrawal is failing: the
 *   release grants the leaver's place, and the withdrawal, once it lands, must pass that grant
 *   on to the waiter (`withdrawReservation`: a grant not confirmed goes to the next waiting
 *   process).
 */
export type ReleasePlan = 'after-withdrawal' | 'at-once';

export interface LostWithdrawalRound {
  /** The leaver's `update`s closed in a row (the driver retries each write once by itself). */
  times: number;
  release: ReleasePlan;
}

export interface LostWithdrawalOptions {
  libDir?: string;
  rounds: LostWithdrawalRound[];
  name: string;
}

interface Cast {
  holder: StartedWorker;
  leaver: StartedWorker;
  waiter: StartedWorker;
  /** The leaver's `appName`, which scopes the fail point to its connections. */
  leaverApp: string;
}

/**
 * A lost withdrawal while others wait: 3 processes, one key per round. The holder holds it
 * (20 s lease, released early); the leaver queues first (the head of the line), the waiter
 * behind it (20 s timeout). The leaver's `update`s (its only ones are withdrawals: attempts,
 * renewals, releases and kept places are `findAndModify`) are closed `times` in a row by
 * `failCommand` scoped to its `appName`; its call times out (1.5 s) and its withdrawal fails,
 * more often than the driver's one retry absorbs. The holder releases once the withdrawal got
 * through, or at once (see {@link ReleasePlan}).
 * Checked: the checker (no overlap, fences increasing in grant order, nothing left held) and no
 * orphaned lease; the leaver's call failed with `LockNotAcquiredError`; every failure of the
 * fail point fired (the withdrawal was tried until it got through) and its place left the line;
 * the waiter has the key within 1.5 s + 600 ms of the release (or of the last failure, if
 * later), well under the 5 s a grant to the stale place would cost; the line is empty at the
 * round's end.
 */
export async function runLostWithdrawals(
  server: FaultServer,
  options: LostWithdrawalOptions,
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, options.name);
  const expect = new Expectations();
  const notes: string[] = [];
  try {
    const leaverApp = `${options.name}-leaver`;
    const spawnedFrom = sharedClockMs();
    const [holder, leaver, waiter] = await run.spawn([
      { label: 'holder', libDir: options.libDir },
      { label: 'leaver', libDir: options.libDir, uri: run.uriFor(leaverApp) },
      { label: 'waiter', libDir: options.libDir },
    ]);
    const spawnMs = sharedClockMs() - spawnedFrom;
    run.sampleLeases({ boundMs: orphanBoundMs(5000) });
    const cast: Cast = { holder, leaver, waiter, leaverApp };
    for (const [i, round] of options.rounds.entries()) {
      notes.push(
        `round ${i + 1} (${round.times}×, ${round.release}): ${await lostWithdrawalRound(run, expect, cast, round, i)}`,
      );
    }
    const violations = await run.check({ leaseMs: holderTtlMs }, expect.violations);
    dumpHistory(run, { notes });
    return {
      operations: run.history.sections.length,
      violations,
      notes:
        `3 processes started in ${Math.round(spawnMs)} ms; ${notes.join('; ')}; ` +
        `${run.leaseSamplingNotes()}; violations: ${countByKind(violations)}`,
    };
  } finally {
    await run.failPoint('off').catch(() => undefined);
    await run.stop();
  }
}

async function lostWithdrawalRound(
  run: FaultRun,
  expect: Expectations,
  { holder, leaver, waiter, leaverApp }: Cast,
  round: LostWithdrawalRound,
  index: number,
): Promise<string> {
  const key = `lw${index}:${round.release}`;
  const sampler = new GrantSampler(run, key, 50);
  const places = (sample: GrantSample | undefined) =>
    (sample?.reservations ?? []).map((r) => r.holder);
  const lineIs = (...holders: StartedWorker[]) =>
    poll(async () => {
      const line = places(await sampler.read());
      return line.join() === holders.map((h) => h.holderId).join() ? true : undefined;
    }, 5000);
  try {
    await run.hold(holder, { key, ttlMs: holderTtlMs, timeoutMs: 5000, renew: false });
    const leaverCalledAt = sharedClockMs();
    const leaving = leaver.process.call('hold', {
      key,
      ttlMs: waiterTtlMs,
      timeoutMs: leaverTimeoutMs,
      renew: false,
    });
    const left = leaving.then(
      (held) => ({ held, error: undefined, at: sharedClockMs() }),
      (error: unknown) => ({ held: undefined, error, at: sharedClockMs() }),
    );
    expect.that((await lineIs(leaver)) === true, key, 'the leaver never took its place in line');
    const waiting = run.hold(waiter, {
      key,
      ttlMs: waiterTtlMs,
      timeoutMs: waiterTimeoutMs,
      renew: false,
    });
    // Settled here too, so that a rejection is never unhandled; awaited below.
    waiting.catch(() => undefined);
    expect.that(
      (await lineIs(leaver, waiter)) === true,
      key,
      `the line was never leaver, then waiter: ${places(await sampler.read()).join(', ')}`,
    );

    const before = await run.failPoint(
      { times: round.times },
      { failCommands: ['update'], appName: leaverApp, closeConnection: true },
    );
    const armedMs = sharedClockMs() - leaverCalledAt;
    const early = await Promise.race([left, sleep(0).then(() => undefined)]);
    expect.that(early === undefined, key, 'the leaver gave up before the fault was armed');

    const gaveUp = await left;
    run.noteFailedCalls(leaver, [{ key, calledAt: leaverCalledAt, settledAt: gaveUp.at }]);
    const errorName = (gaveUp.error as { errorName?: string } | undefined)?.errorName;
    expect.that(
      errorName === 'LockNotAcquiredError',
      key,
      gaveUp.held
        ? `the leaver was granted the key (fence ${gaveUp.held.fence}) instead of timing out`
        : `the leaver's call failed with ${errorName ?? String(gaveUp.error)}, not a timeout`,
    );
    if (gaveUp.held) await leaver.process.call('release', { key });

    let releasedAt = Number.NaN;
    const release = async () => {
      releasedAt = sharedClockMs();
      const released = await holder.process.call('release', { key });
      expect.that(
        released.outcome === 'released',
        key,
        `the holder's release: ${released.outcome}`,
      );
    };
    const releasing = round.release === 'at-once' ? release() : undefined;

    // Each failure as the parent hears of it: the last one ends the fault.
    const firedAt: number[] = [];
    for (let k = 1; k <= round.times; k++) {
      const budget = gaveUp.at + faultBudgetMs - sharedClockMs();
      if (budget <= 0 || !(await run.failPointFired(before + k, Math.max(1, budget)))) break;
      firedAt.push(sharedClockMs());
    }
    const faultEndedAt = firedAt[firedAt.length - 1] ?? gaveUp.at;
    const placeGone = await poll(
      async () => (places(await sampler.read()).includes(leaver.holderId) ? undefined : true),
      Math.max(0, faultEndedAt + placeGoneBoundMs - sharedClockMs()),
      10,
    );
    const placeGoneAt = sharedClockMs();
    expect.that(
      placeGone === true,
      key,
      `the leaver's place was still in line ${Math.round(placeGoneAt - gaveUp.at)} ms after its ` +
        `call gave up (${firedAt.length} of ${round.times} failures fired): its withdrawal was lost`,
    );
    if (releasing) await releasing;
    else await release();

    const got = await waiting.then(
      (held: HeldLock) => held,
      (error: unknown) => error,
    );
    const held = (got as HeldLock).fence !== undefined ? (got as HeldLock) : undefined;
    const from = Math.max(releasedAt, faultEndedAt);
    const lateMs = held ? held.start - from : Number.NaN;
    expect.that(
      held !== undefined && lateMs <= handOverBoundMs,
      key,
      held
        ? `the waiter had the key ${Math.round(held.start - releasedAt)} ms after the holder's ` +
            `release (${Math.round(lateMs)} ms after ${
              from === releasedAt ? 'the release' : "the leaver's last failed withdrawal"
            }; bound ${handOverBoundMs} ms, a grant to the leaver's stale place costs ` +
            `${GRANT_LEASE_MS} ms)`
        : `the waiter never had the key: ${String((got as Error)?.message ?? got)}`,
    );
    const fired = (await run.failPoint('off')) - before;
    expect.that(
      fired === round.times,
      key,
      `the fail point fired ${fired} of ${round.times} times: the leaver's withdrawal was not ` +
        'tried until it got through',
    );
    if (held) {
      await sleep(100);
      await waiter.process.call('release', { key });
    }
    const after = await poll(async () => {
      const sample = await sampler.read();
      return sample && !sample.live && sample.reservations.length === 0 ? sample : undefined;
    }, 2000);
    expect.that(
      after !== null,
      key,
      `the key was not left free with an empty line: line ${places(await sampler.read()).join(', ')}`,
    );
    return (
      `armed ${Math.round(armedMs)} ms into the leaver's wait; ${fired} failures over ${Math.round(faultEndedAt - gaveUp.at)} ms after the leaver gave ` +
      `up, place gone ${Math.round(placeGoneAt - gaveUp.at)} ms after; waiter held ` +
      `${held ? `${Math.round(held.start - releasedAt)} ms after the release` : 'never'}`
    );
  } finally {
    await sampler.stop();
  }
}

/** The rounds the suite runs: 2 to 6 failures, released after the withdrawal and at once. */
export const lostWithdrawalRounds: LostWithdrawalRound[] = [
  { times: 2, release: 'after-withdrawal' },
  { times: 4, release: 'at-once' },
  { times: 4, release: 'after-withdrawal' },
  { times: 6, release: 'at-once' },
];

export const grantLostWithdrawal: GrantScenario = {
  name: "5. a lost withdrawal while others wait (the leaver's updates closed by failCommand)",
  run: (server: FaultServer, libDir?: string) =>
    runLostWithdrawals(server, { libDir, rounds: lostWithdrawalRounds, name: 'grant_withdraw' }),
};
