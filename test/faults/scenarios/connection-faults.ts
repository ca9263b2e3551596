import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { ContendStats } from '../../support/fault-protocol';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import { Expectations, sleep, type Scenario } from './scenario';

const ttlMs = 1000;
/** Client-side timeout of the "reply lost after the write" worker (see `replyLostAfterWrite`). */
const socketTimeoutMs = 1500;
/** How long a single fault of the storm may wait for its target's next command. */
const firesWithinMs = 3000;
/** Generous bound for a wake-up after a release: well under the 5 s safety poll. */
const wakeUpBoundMs = 4000;

/** One `failCommand` configuration aimed at one worker's connections (by appName). */
type Fault = (target: string) => Record<string, unknown>;

const faults: Record<string, Fault> = {
  // The connection closes before the command runs: the driver retries the write.
  closeConnection: (appName) => ({
    failCommands: ['findAndModify'],
    closeConnection: true,
    appName,
  }),
  // A retryable error reply: the driver retries once.
  shutdownInProgress: (appName) => ({ failCommands: ['findAndModify'], errorCode: 91, appName }),
  // The command is held past the client's socket timeout, then runs: its reply is lost after
  // the write, and the driver's retry must get the first result (retryable writes).
  replyLostAfterWrite: (appName) => ({
    failCommands: ['findAndModify'],
    blockConnection: true,
    blockTimeMS: socketTimeoutMs + 1000,
    appName,
  }),
};

/**
 * Connection faults from `failCommand`: single faults on acquire, renew and release while two
 * processes contend; renewals failing for good; change-stream getMore failing with resumable
 * and non-resumable errors. No double grant, no lost wake-up, no leaked lock.
 */
export const connectionFaults: Scenario = {
  name: '4. connection faults (failCommand)',
  async run(server) {
    const run = new FaultRun(server, 'connfaults');
    const expect = new Expectations();
    const notes: string[] = [];
    try {
      const [a, b] = await run.spawn([
        { label: 'faultA' },
        { label: 'faultB', uriOptions: `socketTimeoutMS=${socketTimeoutMs}` },
      ]);
      const storm = await faultStorm(run, a, b, expect);
      notes.push(`single faults fired/armed: ${storm}`);
      notes.push(await renewFailing(run, a, b, expect));
      for (const resumable of [true, false]) {
        notes.push(await getMoreFailing(run, a, b, resumable, expect));
      }
      await run.failPoint('off');
      const violations = await run.check({ leaseMs: ttlMs }, expect.violations);
      return { operations: run.history.sections.length, violations, notes: notes.join('; ') };
    } finally {
      await run.stop();
    }
  },
};

/** A and B contend while single faults hit one of them every few hundred ms. */
async function faultStorm(
  run: FaultRun,
  a: StartedWorker,
  b: StartedWorker,
  expect: Expectations,
): Promise<string> {
  const stopAt = sharedClockMs() + 8000;
  const contention = [a, b].map((w) =>
    w.process.call('contend', {
      keys: ['storm:1', 'storm:2'],
      workers: 3,
      ttlMs,
      timeoutMs: 20_000,
      hold: { shortMaxMs: 10, longShare: 0.02, longMinMs: ttlMs * 1.2, longMaxMs: ttlMs * 1.5 },
      renewShare: 0.5,
      stopAt,
      maxSections: 1000,
    }),
  );
  const kinds = Object.keys(faults);
  const fired = new Map<string, number>(kinds.map((kind) => [kind, 0]));
  const armed = new Map<string, number>(kinds.map((kind) => [kind, 0]));
  for (let injected = 0; sharedClockMs() < stopAt - 1500; injected++) {
    const kind = kinds[injected % kinds.length];
    // Only B has the short socket timeout that turns a held command into a lost reply.
    const target = kind === 'replyLostAfterWrite' || injected % 2 === 1 ? b : a;
    const before = await run.failPoint({ times: 1 }, faults[kind](target.label));
    armed.set(kind, armed.get(kind)! + 1);
    // Armed until the target's next findAndModify takes it, then given time to play out.
    if (await run.failPointFired(before + 1, firesWithinMs)) fired.set(kind, fired.get(kind)! + 1);
    await sleep(kind === 'replyLostAfterWrite' ? socketTimeoutMs + 1500 : 300);
  }
  await run.failPoint('off');
  const stats: ContendStats[] = await Promise.all(contention);
  for (const s of stats) {
    expect.that(s.errors.length === 0, 'storm', `worker errors: ${s.errors.join('; ')}`);
  }
  for (const kind of kinds) {
    const missed = armed.get(kind)! - fired.get(kind)!;
    expect.that(
      missed === 0,
      'storm',
      `${missed} ${kind} fault(s) found no command in ${firesWithinMs} ms`,
    );
  }
  return kinds.map((kind) => `${kind} ${fired.get(kind)}/${armed.get(kind)}`).join(', ');
}

/** A's renewals fail for good: A must hear of the loss; B takes over after the lease. */
async function renewFailing(
  run: FaultRun,
  a: StartedWorker,
  b: StartedWorker,
  expect: Expectations,
): Promise<string> {
  const key = 'renew:failing';
  await run.hold(a, { key, ttlMs: 1500, timeoutMs: 5000, renew: true });
  const takeover = run.hold(b, { key, ttlMs: 1500, timeoutMs: 20_000, renew: true });
  await run.failPoint('alwaysOn', { ...faults.shutdownInProgress(a.label) });
  const loss = await a.process.call('waitForLoss', { key, timeoutMs: 10_000 });
  const taken = await takeover;
  await run.failPoint('off');
  expect.that(loss.signalAt !== null, key, 'A was not told that its renewals failed');
  const released = await a.process.call('release', { key });
  expect.that(released.outcome === 'lost', key, 'A released a lock whose renewals failed');
  await b.process.call('release', { key });
  // Told before B took over is the local deadline's promise, but it depends on A's event loop
  // running on time, so it is reported rather than asserted.
  const margin = Math.round(taken.start - (loss.signalAt ?? Number.NaN));
  return `renewals failing: A told ${Math.abs(margin)} ms ${margin >= 0 ? 'before' : 'after'} B took over`;
}

/** B waits on a change stream whose getMore fails; A's release must still wake it. */
async function getMoreFailing(
  run: FaultRun,
  a: StartedWorker,
  b: StartedWorker,
  resumable: boolean,
  expect: Expectations,
): Promise<string> {
  const key = `getmore:${resumable ? 'resumable' : 'fatal'}`;
  await run.hold(a, { key, ttlMs: 60_000, timeoutMs: 5000, renew: false });
  const waiting = run.hold(b, { key, ttlMs: 5000, timeoutMs: 20_000, renew: false });
  await sleep(300);
  const times = resumable ? 3 : 1;
  const before = await run.failPoint(
    { times },
    resumable
      ? {
          failCommands: ['getMore'],
          errorCode: 91,
          errorLabels: ['ResumableChangeStreamError'],
          appName: b.label,
        }
      : { failCommands: ['getMore'], errorCode: 2, errorLabels: [], appName: b.label },
  );
  // Let the failing getMores happen (each waits up to maxAwaitTimeMS for events first).
  await sleep(2500);
  const fired = (await run.failPoint('off')) - before;
  expect.that(fired === times, key, `${fired} of ${times} getMore faults fired before the release`);
  const releasedAt = sharedClockMs();
  await a.process.call('release', { key });
  const woke = await waiting.catch((error: unknown) => ({ start: Number.NaN, error }));
  const latency = woke.start - releasedAt;
  expect.that(
    latency <= wakeUpBoundMs,
    key,
    `B woke ${Math.round(latency)} ms after the release (lost wake-up?)`,
  );
  if (Number.isFinite(woke.start)) await b.process.call('release', { key });
  return `getMore ${resumable ? 'resumable' : 'non-resumable'} error: woke in ${Math.round(latency)} ms`;
}
