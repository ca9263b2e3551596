import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { HeldLock } from '../../support/fault-protocol';
import type { FaultServer } from '../../support/fault-server';
import { countByKind } from '../harness/contend-checks';
import { FaultRun, lockCollection, type StartedWorker } from '../harness/fault-run';
import { Expectations, poll, sleep, type Scenario, type ScenarioOutcome } from './scenario';

const engine = { engine: 'v2' as const };
/** The holder's lease: long, so that nobody is freed by its end (it is released early). */
const holderTtlMs = 20_000;
/** The leaver's entry lease (renewed every third of it while it waits). */
const leaverTtlMs = 6000;
/**
 * The leaver gives up this soon after calling `acquire`: before its first renewal, so its
 * leave is its only command after the join, and after the fault is in place (checked).
 */
const leaverTimeoutMs = 1500;
/** Slack for a waiter's wake-up and the machine's load. */
const slackMs = 1000;
/** Rounds per kind of loss before a late fault counts as a violation. */
const maxRounds = 3;
const noop = () => undefined;

/**
 * Engine v2, a lost withdrawal while others wait: the holder holds the key; the leaver joins
 * the line behind it; the leaver's commands are then closed by `failCommand` scoped to its
 * `appName`, the waiter joins behind it, and the leaver's call times out. `retried`: the leaver's entry
 * must be gone within 2.5 s (well within its 6 s lease), nothing else with it, before the holder releases. `lost`: the
 * holder releases at once, and the line is led by the leaver's stale entry. Checked: the
 * leaver's call failed with `LockNotAcquiredError`; the releases were not lost; the waiter
 * holds within 1 s of the release (`retried`), or within the leaver's entry lease of its last
 * write plus 1 s (`lost`); the history checker finds no overlap.
 */
export async function runLineLostWithdrawal(
  server: FaultServer,
  libDir?: string,
  losses: readonly ('retried' | 'lost')[] = ['retried', 'lost'],
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, 'line_lw');
  const expect = new Expectations();
  const notes: string[] = [];
  try {
    const leaverApp = 'line-lw-leaver';
    const [holder, leaver, waiter] = await run.spawn([
      { label: 'holder', libDir, options: engine },
      { label: 'leaver', libDir, options: engine, uri: run.uriFor(leaverApp) },
      { label: 'waiter', libDir, options: engine },
    ]);
    /** One round on `key`: 'late' when the fault came after the leaver may have left. */
    const runRound = async (key: string, loss: 'retried' | 'lost'): Promise<'done' | 'late'> => {
      const line = () => lineHolders(run, key);
      const lineIsWithin = (timeoutMs: number, ...workers: StartedWorker[]) =>
        poll(async () => {
          const ids = await line();
          return ids.join() === workers.map((w) => w.holderId).join() ? true : undefined;
        }, timeoutMs);
      const lineIs = (...workers: StartedWorker[]) => lineIsWithin(5000, ...workers);
      await run.hold(holder, { key, ttlMs: holderTtlMs, timeoutMs: 5000, renew: false });
      const leaverCalledAt = sharedClockMs();
      let gaveUpAt = Infinity;
      const left = leaver.process
        .call('hold', { key, ttlMs: leaverTtlMs, timeoutMs: leaverTimeoutMs, renew: false })
        .then(
          () => 'held',
          (error: unknown) => (error as { errorName?: string }).errorName ?? String(error),
        )
        .finally(() => (gaveUpAt = sharedClockMs()));
      expect.that((await lineIs(holder, leaver)) === true, key, 'the leaver never joined');
      // The leaver's last write before the fault: its entry ends within its lease of now.
      const leaseEndsBy = sharedClockMs() + leaverTtlMs;
      // Armed at once (it closes only the leaver's commands, and the leaver sends none until it
      // gives up). Three failures: more than the leave's first try and its driver retry (so
      // that a lost leave is never retried by chance); a retried leave lands on its second try.
      await run.failPoint(loss === 'retried' ? { times: 3 } : 'alwaysOn', {
        failCommands: ['findAndModify'],
        appName: leaverApp,
        closeConnection: true,
      });
      const faultFrom = sharedClockMs();
      const waiting = run.hold(waiter, { key, ttlMs: 5000, timeoutMs: 20_000, renew: false });
      waiting.catch(() => undefined);
      const outcome = await left;
      // A leave sent before the fault would test nothing (a slow machine's joins, say). The
      // leaver gave up no sooner than its timeout after this process called it (when its reply
      // arrives here is later still, and proves nothing).
      if (faultFrom >= leaverCalledAt + leaverTimeoutMs) {
        await run.failPoint('off');
        await holder.process.call('release', { key });
        await waiting.then(() => waiter.process.call('release', { key }), noop);
        run.noteFailedCalls(leaver, [{ key, calledAt: leaverCalledAt, settledAt: gaveUpAt }]);
        return 'late';
      }
      const joined = () =>
        poll(async () => (await line()).includes(waiter.holderId) || undefined, 5000);
      expect.that((await joined()) === true, key, 'the waiter never joined');
      run.noteFailedCalls(leaver, [{ key, calledAt: leaverCalledAt, settledAt: gaveUpAt }]);
      expect.that(outcome === 'LockNotAcquiredError', key, `the leaver's call: ${outcome}`);
      if (loss === 'retried') {
        // Its entry is gone well before its lease would end it, and nothing else is.
        expect.that(
          (await lineIsWithin(2500, holder, waiter)) === true,
          key,
          `the line after the leaver's retried leave: ${(await line()).join(', ')}`,
        );
      }
      const releasedAt = sharedClockMs();
      const released = await holder.process.call('release', { key });
      expect.that(
        released.outcome === 'released',
        key,
        `the holder's release: ${released.outcome}`,
      );
      const got = await waiting.then(
        (held: HeldLock) => held,
        () => undefined,
      );
      if (loss === 'lost') await run.failPoint('off');
      const boundAt =
        loss === 'retried' ? Math.max(releasedAt, gaveUpAt) + slackMs : leaseEndsBy + slackMs;
      expect.that(
        got !== undefined && got.start <= boundAt,
        key,
        got
          ? `the waiter held ${Math.round(got.start - releasedAt)} ms after the release ` +
              `(bound ${Math.round(boundAt - releasedAt)} ms)`
          : 'the waiter never held the key',
      );
      if (got) {
        notes.push(
          `${loss}: the waiter held ${Math.round(got.start - releasedAt)} ms after the release`,
        );
        const last = await waiter.process.call('release', { key });
        expect.that(last.outcome === 'released', key, `the waiter's release: ${last.outcome}`);
      }
      await sleep(100);
      return 'done';
    };
    for (const loss of losses) {
      // A round whose fault came too late proves nothing: it is run again on a fresh key.
      let round = 1;
      while ((await runRound(`lw:${loss}:${round}`, loss)) === 'late') {
        if (round === maxRounds) {
          expect.that(false, `lw:${loss}`, `the fault was late in all ${maxRounds} rounds`);
          break;
        }
        notes.push(`${loss}: round ${round}'s fault came late, run again`);
        round += 1;
      }
    }
    const violations = await run.check({ leaseMs: holderTtlMs }, expect.violations);
    return {
      operations: run.history.sections.length,
      violations,
      notes: `${notes.join('; ')}; violations: ${countByKind(violations)}`,
    };
  } finally {
    await run.failPoint('off').catch(() => undefined);
    await run.stop();
  }
}

/** The holder ids of the live entries of `key`'s line, in order. */
async function lineHolders(run: FaultRun, key: string): Promise<string[]> {
  const [doc] = await run.admin
    .db(run.dbName)
    .collection(`${lockCollection}_line`)
    .aggregate<{ ids: string[] }>([
      { $match: { _id: key } },
      {
        $project: {
          ids: {
            $map: {
              input: { $filter: { input: '$line', cond: { $gt: ['$$this.e', '$$NOW'] } } },
              in: '$$this.h',
            },
          },
        },
      },
    ])
    .toArray();
  return doc?.ids ?? [];
}

export const lineLostWithdrawal: Scenario = {
  name: 'engine v2: a lost withdrawal while others wait (retried; lost until its lease ends)',
  run: (server) => runLineLostWithdrawal(server),
};
