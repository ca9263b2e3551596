import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { ContendArgs, RecoverReport, RecordedEvents } from '../../support/fault-protocol';
import { checkContention, settleWithin, sumStats, type Settled } from '../harness/contend-checks';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import { Expectations, sleep, type Scenario } from './scenario';

const restarts = 5;
const keys = ['restart:a', 'restart:b'];
/** Held across each kill by one worker and waited for by another. */
const heldKey = 'restart:held';
const ttlMs = 1500;
const timeoutMs = 2000;
/** The module option: the longest one lock command may take. */
const operationTimeoutMs = 1000;
/** An acquisition must settle by its `timeoutMs` plus this. */
const settleBoundMs = operationTimeoutMs + 1000;
/** Every call must work again this soon after the server accepts connections (the bound). */
const recoveryBoundMs = 5000;
/** How long the probes go on before giving up (past the bound, to report how late). */
const probeForMs = 20_000;
/** Each probe (acquire, ping, health) gives up after this and is tried again. */
const probeTimeoutMs = 1000;
/** Contention before each kill, and after each recovery. */
const beforeKillMs = 1200;
const afterRecoveryMs = 1000;
/** Contention goes on this long into the outage, so calls are on their way when it starts. */
const intoOutageMs = 300;
/**
 * The restarted offline server has lost every lease (a restarted mongod keeps them): it is
 * started no sooner than this after the kill, when every lease granted before it has run out
 * (holders count down from before they sent the acquire), so no holder is still promised a
 * lock that the new server would grant again.
 */
const restartAfterMs = ttlMs + 300;
/** The waiter blocked on the held key across the restart. */
const waitForHeldMs = 60_000;

interface Round {
  killedAt: number;
  backAt: number;
  reports: RecoverReport[];
  waiterGrantedAt: number | null;
}

/**
 * MongoDB killed (SIGKILL) and restarted on the same port, five times in one run, while 3
 * worker processes contend on 2 keys, one holds a key across the kill that another waits for
 * (its change stream open), and two watch `events$`. One worker (`restart0`) gives the module
 * its own application client and pings on it. After each restart, measured from the moment
 * the new server accepts connections: within 5 s every worker's service takes and releases a
 * lock, its application client answers `ping`, and the library's health indicator says `up`;
 * the waiter gets the held key (the new server has forgotten it) within the same bound. Then
 * the workers contend again, and both `events$` watchers must report acquisitions made after
 * the restart. At the end: the history checker (no overlap, no lock held by nobody), every
 * contended acquisition settled by its timeout + `operationTimeoutMs` + 1 s, and no error but
 * the library's typed ones. Needs the offline server (a process it can kill): with
 * MONGODB_URI it is skipped, and says so in its row.
 */
export const serverRestart: Scenario = {
  name: 'server restart (SIGKILL and restart on the same port, 5 times)',
  async run(server) {
    const { kill, restart, restartReady } = server;
    if (!kill || !restart || !restartReady) {
      return {
        operations: 0,
        violations: [],
        notes: 'skipped: the server is MONGODB_URI, not a process this suite can kill',
      };
    }
    const run = new FaultRun(server, 'restart');
    const expect = new Expectations();
    const rounds: Round[] = [];
    try {
      const workers = await run.spawn(
        Array.from({ length: 3 }, (_, i) => ({
          label: `restart${i}`,
          options: { operationTimeoutMs },
          sharedClient: i === 0,
        })),
      );
      const [holder, , waiter] = workers;
      const watchers = workers.slice(0, 2);
      for (const w of watchers) await w.process.call('watchEvents', { keys });
      const contended: Settled[][] = [];
      let electionId = await electionIdOf(run);
      for (let round = 0; round < restarts; round++) {
        try {
          const killAt = sharedClockMs() + beforeKillMs;
          const contention = contend(workers, killAt + intoOutageMs);
          await run.hold(holder, { key: heldKey, ttlMs, timeoutMs, renew: true });
          const waiting = waiter.process
            .call('hold', { key: heldKey, ttlMs, timeoutMs: waitForHeldMs, renew: false })
            .then(
              () => sharedClockMs(),
              (error: unknown) => {
                expect.that(
                  false,
                  heldKey,
                  `round ${round + 1}: the waiter failed: ${String(error)}`,
                );
                return null;
              },
            );
          // The replacement is loaded before the kill, so the restart takes a mongod's time.
          await restartReady();
          await sleep(Math.max(0, killAt - sharedClockMs()));
          await kill();
          const killedAt = sharedClockMs();
          await sleep(restartAfterMs);
          await restart();
          const backAt = sharedClockMs();
          // The premise: the restart looks like a restarted mongod's (a new election, a higher
          // electionId), as the driver sees it. An equal or lower one is another scenario.
          const restartedAs = await electionIdOf(run);
          expect.that(
            restartedAs > electionId,
            '*',
            `round ${round + 1}: the restarted server's electionId ${restartedAs} is not above ` +
              `the one before it, ${electionId}`,
          );
          electionId = restartedAs;
          const reports = await Promise.all(
            workers.map((w) =>
              w.process.call('recover', {
                key: `restart:probe:${w.label}`,
                untilShared: backAt + probeForMs,
                probeTimeoutMs,
              }),
            ),
          );
          const waiterGrantedAt = await waiting;
          rounds.push({ killedAt, backAt, reports, waiterGrantedAt });
          checkRound(round, workers, rounds[round], expect);
          await release(holder, waiter, waiterGrantedAt !== null, expect);
          contended.push(await Promise.all(contention));
          contended.push(await Promise.all(contend(workers, sharedClockMs() + afterRecoveryMs)));
        } catch (error) {
          // A worker that cannot take part any more (its call failed): later rounds would
          // only repeat it.
          expect.that(false, '*', `round ${round + 1} stopped: ${String(error)}`);
          break;
        }
      }
      const events = await Promise.all(
        watchers.map((w) => w.process.call('takeEvents', { unsubscribe: true })),
      );
      for (const [i, recorded] of events.entries()) {
        checkEvents(watchers[i].label, recorded, rounds, expect);
      }
      const stats = contended.flatMap((results) =>
        checkContention(run, workers, results, expect, { timeoutMs, settleBoundMs }),
      );
      const violations = await run.check({ leaseMs: ttlMs }, expect.violations);
      const worst = Math.max(
        ...rounds.flatMap((r) => r.reports.map((p) => (p.allAt ?? Infinity) - r.backAt)),
      );
      return {
        operations: run.history.sections.length,
        violations,
        notes: [
          `${rounds.length} restarts`,
          `slowest recovery ${Math.round(worst)} ms after the server was back`,
          `restart took ${rounds.map((r) => Math.round(r.backAt - r.killedAt)).join('/')} ms`,
          `${sumStats(stats, 'sections')} contended sections`,
          `${sumStats(stats, 'unavailable')} unavailable`,
          `${sumStats(stats, 'timeouts')} timeouts`,
          `events$ ${events.map((e) => e.events.length).join('/')}`,
        ].join('; '),
      };
    } finally {
      // The suite's server must be up for whatever runs next.
      await restart().catch(() => undefined);
      await run.stop();
    }
  },
};

/** The primary's electionId (hex) as `hello` reports it now. */
async function electionIdOf(run: FaultRun): Promise<string> {
  const hello = await run.admin.db('admin').command({ hello: 1 });
  return String(hello.electionId?.toHexString?.() ?? '');
}

function contend(workers: StartedWorker[], stopAt: number): Promise<Settled>[] {
  const args: ContendArgs = {
    keys,
    workers: 2,
    ttlMs,
    timeoutMs,
    hold: { shortMaxMs: 80, longShare: 0.05, longMinMs: 1000, longMaxMs: 1800 },
    renewShare: 0.5,
    stopAt,
    maxSections: 5000,
  };
  return workers.map((w) =>
    settleWithin(w.process.call('contend', args), stopAt + timeoutMs + settleBoundMs + 15_000),
  );
}

function checkRound(
  round: number,
  workers: StartedWorker[],
  { backAt, reports, waiterGrantedAt }: Round,
  expect: Expectations,
): void {
  const after = (at: number | null) => (at === null ? 'never' : `${Math.round(at - backAt)} ms`);
  for (const [i, report] of reports.entries()) {
    expect.that(
      report.allAt !== null && report.allAt - backAt <= recoveryBoundMs,
      '*',
      `round ${round + 1}: ${workers[i].label}${report.shared ? ' (shared client)' : ''} ` +
        `recovered ${after(report.allAt)} after the server was back (bound ` +
        `${recoveryBoundMs} ms): lock ${after(report.lockAt)}, ping ${after(report.pingAt)}, ` +
        `health ${after(report.healthAt)}; last errors: ${report.lastErrors.join('; ')}`,
    );
  }
  expect.that(
    waiterGrantedAt !== null && waiterGrantedAt - backAt <= recoveryBoundMs,
    heldKey,
    `round ${round + 1}: the waiter got the key the restarted server had forgotten ` +
      `${after(waiterGrantedAt)} after it was back (bound ${recoveryBoundMs} ms)`,
  );
}

/** The holder's lease died with the old server: its release reports the loss. */
async function release(
  holder: StartedWorker,
  waiter: StartedWorker,
  waiterHolds: boolean,
  expect: Expectations,
): Promise<void> {
  const held = await holder.process.call('release', { key: heldKey });
  expect.that(
    held.outcome === 'lost',
    heldKey,
    `the holder's release across the restart said ${held.outcome}, not lost`,
  );
  if (waiterHolds) await waiter.process.call('release', { key: heldKey });
}

/** A watcher reports acquisitions made after each restart: its `events$` came back. */
function checkEvents(
  label: string,
  recorded: RecordedEvents,
  rounds: Round[],
  expect: Expectations,
): void {
  expect.that(
    recorded.errors.length === 0 && !recorded.completed,
    '*',
    `${label}: events$ ended (${recorded.errors.join('; ') || 'completed'})`,
  );
  for (const [i, round] of rounds.entries()) {
    const until = rounds[i + 1]?.killedAt ?? Infinity;
    const seen = recorded.events.filter(
      (e) => e.type === 'acquired' && e.receivedAt > round.backAt && e.receivedAt < until,
    ).length;
    expect.that(seen > 0, '*', `${label}: events$ reported no acquisition after restart ${i + 1}`);
  }
}
