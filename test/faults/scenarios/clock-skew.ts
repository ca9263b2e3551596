import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import { Expectations, type Scenario } from './scenario';

const hourMs = 3_600_000;
const ttlMs = 1500;
/** Round trips and scheduling between the grant and the moment the holder notes it. */
const earlyToleranceMs = 300;
const lateMarginMs = 3000;

/**
 * Processes whose `Date` is an hour fast and an hour slow hold and take over from each other
 * exactly as the others do, because leases are decided by the server clock: a waiter gets the
 * key when the lease ends, neither an hour early nor an hour late.
 */
export const clockSkew: Scenario = {
  name: '6. clock skew: +1 h and -1 h processes',
  async run(server) {
    const run = new FaultRun(server, 'skew');
    const expect = new Expectations();
    const notes: string[] = [];
    try {
      const [fast, slow, exact] = await run.spawn([
        { label: 'fast+1h', clockSkewMs: hourMs },
        { label: 'slow-1h', clockSkewMs: -hourMs },
        { label: 'exact', clockSkewMs: 0 },
      ]);
      notes.push(await takeover(run, fast, slow, expect));
      notes.push(await takeover(run, slow, fast, expect));

      const stopAt = sharedClockMs() + 6000;
      const stats = await Promise.all(
        [fast, slow, exact].map((w) =>
          w.process.call('contend', {
            keys: ['skew:a', 'skew:b'],
            workers: 4,
            ttlMs: 1000,
            timeoutMs: 20_000,
            hold: { shortMaxMs: 10, longShare: 0.03, longMinMs: 1200, longMaxMs: 1500 },
            renewShare: 0.5,
            stopAt,
            maxSections: 500,
          }),
        ),
      );
      const errors = stats.flatMap((s) => s.errors);
      expect.that(errors.length === 0, '*', `worker errors: ${errors.join('; ')}`);

      // The documents carry server time: fence numbers start at the server clock in ms (and
      // run ahead of it only by the joins since), so none is an hour off.
      const docs = await run.lines.find({}).toArray();
      expect.that(docs.length > 0, '*', 'no lock document was written');
      for (const doc of docs) {
        const fenceMs = Number(doc.f);
        expect.that(
          Math.abs(fenceMs - Date.now()) < 10 * 60_000,
          String(doc._id),
          `fence number ${String(doc.f)} is not server time`,
        );
      }
      const violations = await run.check({ leaseMs: ttlMs }, expect.violations);
      return { operations: run.history.sections.length, violations, notes: notes.join('; ') };
    } finally {
      await run.stop();
    }
  },
};

/** `holder` takes a lease and never renews or releases it; `waiter` must get it at its end. */
async function takeover(
  run: FaultRun,
  holder: StartedWorker,
  waiter: StartedWorker,
  expect: Expectations,
): Promise<string> {
  const key = `skew:${holder.label}->${waiter.label}`;
  const held = await run.hold(holder, { key, ttlMs, timeoutMs: 5000, renew: false });
  const taken = await run.hold(waiter, { key, ttlMs, timeoutMs: 20_000, renew: false });
  const afterMs = taken.start - held.start;
  expect.that(
    afterMs >= ttlMs - earlyToleranceMs,
    key,
    `${waiter.label} took the key ${Math.round(afterMs)} ms after ${holder.label}, before its ${ttlMs} ms lease ended`,
  );
  expect.that(
    afterMs <= ttlMs + lateMarginMs,
    key,
    `${waiter.label} took the key only ${Math.round(afterMs)} ms after ${holder.label} (lease ${ttlMs} ms)`,
  );
  const loss = await holder.process.call('waitForLoss', { key, timeoutMs: 5000 });
  // Being told at all is the promise; being told before the takeover depends on the holder's
  // event loop running on time (a starved process is a paused one), so it is only reported.
  expect.that(loss.signalAt !== null, key, `${holder.label} was never told of the loss`);
  const toldBefore = loss.signalAt !== null && loss.signalAt <= taken.start;
  const released = await holder.process.call('release', { key });
  expect.that(released.outcome === 'lost', key, `${holder.label} released an expired lease`);
  await waiter.process.call('release', { key });
  return `${holder.label} → ${waiter.label} after ${Math.round(afterMs)} ms (holder told ${toldBefore ? 'before' : 'after'})`;
}
