import type { FaultServer } from '../../support/fault-server';
import { countByKind } from '../harness/contend-checks';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import type { ModeOptions, ModeSectionOutcome, TxSectionOutcome } from './modes-protocol';
import { checkModes, modes, randomBetween, reports, since, waitForReport } from './modes-run';
import { Expectations, sleep, type Scenario, type ScenarioOutcome } from './scenario';

const ttlMs = 1000;
/**
 * The unfrozen transaction's lease. Its renewals (every third of it) write the lock document,
 * and a transaction that sees one land between its first operation and its commit check
 * conflicts and runs again: its work must end well inside one renewal interval.
 */
const controlTtlMs = 3000;
const timeoutMs = 5000;
const markers = 'tx_markers';
/** How long past its lease the frozen holder stays frozen. */
const pastLeaseMinMs = 300;
const pastLeaseMaxMs = 600;

/**
 * Each round: the holder's mode, and who takes the key while it is frozen: nobody (its own
 * lease runs out under it), or a holder in another mode or the same. A shared taker of a
 * shared key comes once the frozen lease has ended (its grant drops the expired entry);
 * the others wait for the key from the start of the freeze.
 */
const plan: { mode: ModeOptions; taker: ModeOptions | null }[] = [
  { mode: { mode: 'shared' }, taker: null },
  { mode: { mode: 'exclusive' }, taker: { mode: 'exclusive' } },
  { mode: { mode: 'shared' }, taker: { mode: 'exclusive' } },
  { mode: { mode: 'exclusive' }, taker: null },
  { mode: { mode: 'shared' }, taker: { mode: 'shared' } },
  { mode: { mode: 'exclusive' }, taker: { mode: 'shared' } },
];

/**
 * Work longer than one renewal interval (a third of the lease), well inside the lease: the
 * holder renews its lease while the transaction runs.
 */
const longWorkMs = 500;
/** How soon such a transaction must have committed (it may run again a few times). */
const longSettleMs = 5000;

export interface TransactionOptions {
  libDir?: string;
  /** Rounds, from the plan above (in turn). Default 6. */
  rounds?: number;
  /** Also run a transaction of each mode that outlasts a renewal, unfrozen. Default true. */
  outlastRenewal?: boolean;
}

/**
 * `withLock(key, fn, { transaction: true, mode })` whose lease is lost in the middle. Per
 * round, in one of 3 processes in turn: `fn` inserts a marker document on the transaction's
 * session, then spins; the harness freezes its process (SIGSTOP) until 300 to 600 ms past the
 * lease it could have had, while another process takes the key or nobody does, and thaws it:
 * `fn` returns before any timer of the holder runs, and the library must refuse to commit.
 * Meanwhile a third process runs a transaction of the same mode on another key, unfrozen.
 * Checked: the frozen transaction rejects with `LockLostError` and its marker is nowhere; the
 * unfrozen one resolves and its marker is there; a waiting taker gets the key; the mode
 * checker over every section. Last, a transaction of each mode whose work outlasts one renewal
 * of its lease (500 ms of a 1 s lease) must commit within 5 s.
 */
export async function runTransaction(
  server: FaultServer,
  options: TransactionOptions = {},
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, 'modes_tx');
  const expect = new Expectations();
  const lostErrors: string[] = [];
  const controlRuns: number[] = [];
  try {
    const workers = await run.spawn(
      Array.from({ length: 3 }, (_, i) => ({
        label: `t${i}`,
        libDir: options.libDir,
      })),
    );
    const markerDocs = run.admin.db(run.dbName).collection<{ _id: string }>(markers);
    const rounds = options.rounds ?? plan.length;
    for (let round = 0; round < rounds; round++) {
      const { mode, taker } = plan[round % plan.length];
      const key = `tx:${mode.mode}`;
      const [holder, other, control] = [0, 1, 2].map((i) => workers[(round + i) % 3]);
      const lostMarker = `frozen-${round}`;
      const keptMarker = `control-${round}`;
      const frozenTx = modes(holder).call('txSection', {
        key,
        ttlMs,
        timeoutMs,
        workMs: 50,
        spin: true,
        markerId: lostMarker,
        markerCollection: markers,
        name: `tx${round}`,
        ...mode,
      });
      const controlTx = modes(control).call('txSection', {
        key: `tx:control:${mode.mode}`,
        // A longer lease: no renewal lands during this short transaction (see the notes).
        ttlMs: controlTtlMs,
        timeoutMs,
        workMs: 150,
        spin: false,
        markerId: keptMarker,
        markerCollection: markers,
        name: `control${round}`,
        ...mode,
      });
      const written = await waitForReport(
        run,
        (s) =>
          s.pid === holder.process.pid &&
          s.markerWritten === true &&
          s.worker.endsWith(`tx${round}`),
        timeoutMs + 2000,
      );
      if (!written) {
        expect.that(false, key, `round ${round}: the transaction never wrote its marker`);
        await Promise.allSettled([frozenTx, controlTx]);
        continue;
      }
      const from = run.pause(holder);
      const joins = mode.mode === 'shared' && taker?.mode === 'shared';
      const take = (): Promise<ModeSectionOutcome> | null =>
        taker
          ? modes(other).call('modeSection', {
              key,
              ttlMs,
              timeoutMs,
              renew: false,
              holdMs: 100,
              name: `taker${round}`,
              ...taker,
            })
          : null;
      let taken = joins ? null : take();
      // Renewed, its lease ends at most a lease after its last renewal, before the freeze.
      if (joins) {
        await sleep(ttlMs + 100 - since(from));
        taken = take();
      }
      await sleep(ttlMs + randomBetween(pastLeaseMinMs, pastLeaseMaxMs) - since(from));
      run.resume(holder);
      const [frozen, kept, took] = await Promise.all([
        settleTx(frozenTx),
        settleTx(controlTx),
        taken?.catch((error: unknown): ModeSectionOutcome => ({
          ok: false,
          errorName: 'worker',
          message: String(error),
          calledAt: 0,
          settledAt: 0,
        })) ?? null,
      ]);
      const takenBy = taker ? `${taker.mode} taker` : 'nobody took it';
      const what = `round ${round} (${mode.mode}, ${takenBy})`;
      expect.that(frozen.thawed, key, `${what}: the frozen transaction did not see its freeze`);
      expect.that(
        !frozen.ok && frozen.errorName === 'LockLostError',
        key,
        `${what}: the frozen transaction ${settledAs(frozen)}, not with LockLostError`,
      );
      if (!frozen.ok) lostErrors.push(`${frozen.message} (fn ran ${frozen.runs}x)`);
      expect.that(
        (await markerDocs.findOne({ _id: lostMarker })) === null,
        key,
        `${what}: the marker written under the lost lease was committed`,
      );
      controlRuns.push(kept.runs);
      expect.that(
        kept.ok && (await markerDocs.findOne({ _id: keptMarker })) !== null,
        `tx:control:${mode.mode}`,
        `${what}: the unfrozen transaction ${kept.ok ? 'resolved, its marker missing' : settledAs(kept)}`,
      );
      if (took) {
        expect.that(
          took.ok,
          key,
          `${what}: the ${taker?.mode} taker got no lock: ${took.ok ? '' : took.message}`,
        );
      }
    }
    if (options.outlastRenewal ?? true) await outlastRenewal(run, workers, expect);
    const violations = await checkModes(run, { leaseMs: controlTtlMs }, expect.violations);
    return {
      operations: run.history.sections.length,
      violations,
      notes:
        `${rounds} frozen transactions, none committed (${distinct(lostErrors)}); ` +
        `fn of the unfrozen ones ran ${controlRuns.join(', ')} times; ` +
        `violations: ${countByKind(violations)}`,
    };
  } finally {
    await run.stop();
  }
}

/**
 * A transaction of each mode, unfrozen, whose work outlasts one renewal of its lease (nothing
 * else touches its key): it must commit within {@link longSettleMs}, its marker there. Its own
 * renewal writes the lock document while the transaction runs.
 */
async function outlastRenewal(
  run: FaultRun,
  workers: StartedWorker[],
  expect: Expectations,
): Promise<void> {
  const markerDocs = run.admin.db(run.dbName).collection<{ _id: string }>(markers);
  const startedAt = sharedClockMs();
  const calls = (['exclusive', 'shared'] as const).map((mode, i) => ({
    mode,
    name: `outlast-${mode}`,
    worker: workers[i],
    call: settleTx(
      modes(workers[i]).call('txSection', {
        key: `tx:outlast:${mode}`,
        ttlMs,
        timeoutMs,
        workMs: longWorkMs,
        spin: false,
        markerId: `outlast-${mode}`,
        markerCollection: markers,
        name: `outlast-${mode}`,
        mode,
      }),
    ),
  }));
  for (const { mode, name, worker, call } of calls) {
    const settled = await Promise.race([
      call,
      sleep(startedAt + longSettleMs - sharedClockMs()).then(() => null),
    ]);
    const what =
      `a ${mode} transaction working ${longWorkMs} ms (${ttlMs} ms lease, renewed every ` +
      `${Math.round(ttlMs / 3)} ms)`;
    if (settled === null) {
      const runs = reports(run).find((s) => s.worker.endsWith(name))?.runs ?? 0;
      expect.that(
        false,
        `tx:outlast:${mode}`,
        `${what} had not settled ${longSettleMs} ms after it was called: fn ran ${runs} times`,
      );
      // Given up on: its process goes, so that only this is reported (not its open section).
      await run.kill(worker);
      continue;
    }
    expect.that(
      settled.ok && (await markerDocs.findOne({ _id: `outlast-${mode}` })) !== null,
      `tx:outlast:${mode}`,
      `${what} ${settled.ok ? 'resolved, its marker missing' : settledAs(settled)} ` +
        `(fn ran ${settled.runs} times)`,
    );
  }
}

function settledAs(outcome: TxSectionOutcome): string {
  return outcome.ok
    ? `resolved (${outcome.result})`
    : `rejected with ${outcome.errorName}: ${outcome.message}`;
}

/** The distinct messages, keys left out. */
function distinct(messages: string[]): string {
  return [...new Set(messages.map((m) => m.replace(/"[^"]*"/g, '…')))].join(' | ');
}

function settleTx(call: Promise<TxSectionOutcome>): Promise<TxSectionOutcome> {
  return call.catch((error: unknown): TxSectionOutcome => ({
    ok: false,
    errorName: 'worker',
    message: String(error),
    calledAt: 0,
    settledAt: 0,
    runs: 0,
    thawed: false,
  }));
}

export const lineTransaction: Scenario = {
  name: 'd. withLock transaction (shared and exclusive) frozen past its lease commits nothing',
  run: (server) => runTransaction(server),
};
