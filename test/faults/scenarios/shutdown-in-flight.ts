import { sharedClockMs, ChildCallError } from '@nestjs-mongo-lock/process-harness';
import type { HeldLock, WithLockOutcome } from '../../support/fault-protocol';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import type { SectionRecord } from '../history/history';
import { orphanBoundMs } from '../history/orphans';
import { Expectations, sleep, type Scenario } from './scenario';

const ttlMs = 1000;
/** Every worker's (the library's default, given explicitly for the lease sampler's bound). */
const operationTimeoutMs = 5000;
/** The handler's worker is closed this long after its handler started. */
const closeAfterMs = 200;
/** Timer slack when comparing a grace period with what the handler saw. */
const timerSlackMs = 5;

interface ShutdownCase {
  name: string;
  /** How long the handler works. */
  workMs: number;
  /** The closing worker's `shutdownGraceMs`. */
  graceMs: number;
}

/** The handler finishes within the grace period. */
const finishesInGrace: ShutdownCase = { name: 'A', workMs: 800, graceMs: 3000 };
/** The handler outlives the grace period. */
const outlivesGrace: ShutdownCase = { name: 'B', workMs: 5000, graceMs: 500 };

/**
 * `close()` (Nest's two shutdown hooks in a row) while a `withLock` handler is running, and
 * another process waits for its key. The handler's worker is closed 200 ms into the handler.
 * A: the handler needs 800 ms, `shutdownGraceMs` 3000: the handler finishes, `withLock`
 * resolves (no error), `close()` resolves only after it, and the waiter gets the key only
 * after the handler's section ended. B: the handler needs 5 s, `shutdownGraceMs` 500: at the
 * end of the grace period the handler is told (its signal aborts, `withLock` rejects with
 * `LockLostError`) before its lock is released, so before the waiter is granted (checker: no
 * overlap, no late notice). In both, new acquisitions on the closing worker fail with
 * `LockServiceClosedError`.
 */
export const shutdownInFlight: Scenario = {
  name: 'shutdown with a withLock handler in flight',
  async run(server) {
    const run = new FaultRun(server, 'shutdown');
    const expect = new Expectations();
    const notes: string[] = [];
    try {
      const [handlerA, waiterA, handlerB, waiterB] = await run.spawn([
        {
          label: 'closingA',
          options: { operationTimeoutMs, shutdownGraceMs: finishesInGrace.graceMs },
        },
        { label: 'waiterA', options: { operationTimeoutMs } },
        {
          label: 'closingB',
          options: { operationTimeoutMs, shutdownGraceMs: outlivesGrace.graceMs },
        },
        { label: 'waiterB', options: { operationTimeoutMs } },
      ]);
      run.sampleLeases({ boundMs: orphanBoundMs(operationTimeoutMs) });
      notes.push(await closeDuringHandler(run, handlerA, waiterA, finishesInGrace, expect));
      notes.push(await closeDuringHandler(run, handlerB, waiterB, outlivesGrace, expect));
      const violations = await run.check({ leaseMs: ttlMs }, expect.violations);
      return {
        operations: run.history.sections.length,
        violations,
        notes: [...notes, run.leaseSamplingNotes()].join('; '),
      };
    } finally {
      await run.stop();
    }
  },
};

async function closeDuringHandler(
  run: FaultRun,
  closing: StartedWorker,
  waiter: StartedWorker,
  c: ShutdownCase,
  expect: Expectations,
): Promise<string> {
  const key = `shutdown:${c.name}`;
  const label = `case ${c.name}`;
  // Replies come back over one IPC channel in the order the worker sent them.
  const replies: string[] = [];
  const handler = closing.process
    .call('withLock', { key, ttlMs, timeoutMs: 5000, workMs: c.workMs })
    .then((outcome) => {
      replies.push('withLock');
      return outcome;
    });
  const started = await handlerStarted(run, closing, key, 5000);
  if (!started) {
    expect.that(false, key, `${label}: the handler never started: ${describe(await handler)}`);
    return `${label}: handler never started`;
  }
  const waiting = run
    .hold(waiter, { key, ttlMs, timeoutMs: 20_000, renew: false })
    .then((lock) => ({ lock, error: undefined }))
    .catch((error: unknown) => ({ lock: undefined as HeldLock | undefined, error }));
  await sleep(Math.max(0, started.start + closeAfterMs - sharedClockMs()));
  const closeCalledAt = sharedClockMs();
  const closed = closing.process.call('close', {}).then(
    () => {
      replies.push('close');
      return undefined;
    },
    (error: unknown) => {
      replies.push('close');
      return error;
    },
  );
  await sleep(50);
  const refused = await refusedWhileClosing(run, closing, `${key}:new`);
  expect.that(
    refused === 'LockServiceClosedError',
    key,
    `${label}: a new acquisition on the closing worker ended with ${refused}, not LockServiceClosedError`,
  );

  const outcome = await handler;
  const closeError = await closed;
  expect.that(closeError === undefined, key, `${label}: close() failed: ${String(closeError)}`);
  const woke = await waiting;
  expect.that(
    woke.lock !== undefined,
    key,
    `${label}: the waiter did not get the key: ${String(woke.error)}`,
  );
  if (woke.lock) await waiter.process.call('release', { key });
  const section = run.history.sections.find((s) => s.holder === closing.holderId && s.key === key);
  if (!section) {
    expect.that(false, key, `${label}: the handler's section was never reported`);
    return `${label}: no section`;
  }

  if (c.workMs < c.graceMs) {
    expect.that(outcome.ok, key, `${label}: withLock did not resolve: ${describe(outcome)}`);
    expect.that(
      section.signalAt === null,
      key,
      `${label}: the handler's signal aborted ${Math.round((section.signalAt ?? 0) - closeCalledAt)} ms after close(), within the grace period`,
    );
    expect.that(
      replies.indexOf('withLock') >= 0 && replies.indexOf('withLock') < replies.indexOf('close'),
      key,
      `${label}: close() resolved before the handler's withLock (replies in order: ${replies.join(', ')})`,
    );
  } else {
    expect.that(
      !outcome.ok && outcome.errorName === 'LockLostError',
      key,
      `${label}: withLock of a handler cut off by shutdown settled with ${describe(outcome)}, not LockLostError`,
    );
    expect.that(section.signalAt !== null, key, `${label}: the handler's signal never aborted`);
    if (section.signalAt !== null) {
      expect.that(
        section.signalAt >= closeCalledAt + c.graceMs - timerSlackMs,
        key,
        `${label}: the handler was told ${Math.round(section.signalAt - closeCalledAt)} ms after close(), before shutdownGraceMs (${c.graceMs} ms)`,
      );
      if (woke.lock) {
        expect.that(
          section.signalAt <= woke.lock.start,
          key,
          `${label}: the waiter was granted ${Math.round(section.signalAt - woke.lock.start)} ms before the handler was told`,
        );
      }
    }
  }
  return summarize(label, section, outcome, closeCalledAt, woke.lock, replies);
}

/** Waits for the handler's open section (reported when `fn` starts). */
async function handlerStarted(
  run: FaultRun,
  worker: StartedWorker,
  key: string,
  timeoutMs: number,
): Promise<SectionRecord | undefined> {
  const deadline = sharedClockMs() + timeoutMs;
  for (;;) {
    const section = run.history.sections.find((s) => s.holder === worker.holderId && s.key === key);
    if (section || sharedClockMs() > deadline) return section;
    await sleep(5);
  }
}

/** The error name a new acquisition on the closing worker fails with ('granted' if it did not). */
async function refusedWhileClosing(
  run: FaultRun,
  worker: StartedWorker,
  key: string,
): Promise<string> {
  try {
    await run.hold(worker, { key, ttlMs, timeoutMs: 1000, renew: false });
    await worker.process.call('release', { key }).catch(() => undefined);
    return 'granted';
  } catch (error) {
    return error instanceof ChildCallError ? error.errorName : String(error);
  }
}

function describe(outcome: WithLockOutcome): string {
  return outcome.ok ? `result ${outcome.result}` : `${outcome.errorName}: ${outcome.message}`;
}

function summarize(
  label: string,
  section: SectionRecord,
  outcome: WithLockOutcome,
  closeCalledAt: number,
  waiterLock: HeldLock | undefined,
  replies: string[],
): string {
  const after = (t: number | null) => (t === null ? '-' : `${Math.round(t - closeCalledAt)} ms`);
  return (
    `${label}: withLock ${outcome.ok ? 'resolved' : `rejected ${outcome.errorName}`}; after ` +
    `close(): work ended ${after(section.end)}, told ${after(section.signalAt)}, waiter ` +
    `granted ${after(waiterLock?.start ?? null)}; replies ${replies.join(' then ')}`
  );
}
