import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { FaultRun } from '../harness/fault-run';
import { Expectations, sleep, type Scenario } from './scenario';

const ttlMs = 2000;
/** Generous: a correctness bound (the lease really ended), not a speed claim. */
const takeoverMarginMs = 3000;

/**
 * A holder that renews its lease is killed with SIGKILL mid-section. Of two waiters in other
 * processes, one takes over within the lease plus a margin, the other after it; a second key
 * held by the dead process with no one waiting must be free once its lease has passed.
 */
export const holderKilled: Scenario = {
  name: '2. holder killed with SIGKILL',
  async run(server) {
    const run = new FaultRun(server, 'killed');
    const expect = new Expectations();
    try {
      const [victim, waiterA, waiterB] = await run.spawn([
        { label: 'victim' },
        { label: 'waiterA' },
        { label: 'waiterB' },
      ]);
      const key = 'killed:contended';
      const orphan = 'killed:orphan';
      await run.hold(victim, { key, ttlMs, timeoutMs: 5000, renew: true });
      await run.hold(victim, { key: orphan, ttlMs, timeoutMs: 5000, renew: true });
      const waits = [waiterA, waiterB].map((w) =>
        run.hold(w, { key, ttlMs, timeoutMs: 30_000, renew: true }).then((held) => ({
          worker: w,
          held,
        })),
      );
      // Let the victim renew at least once, so the lease that runs out is a renewed one.
      await sleep(ttlMs);
      const diedAt = await run.kill(victim);

      const first = await Promise.race(waits);
      const takeoverMs = first.held.start - diedAt;
      expect.that(
        takeoverMs <= ttlMs + takeoverMarginMs,
        key,
        `took ${Math.round(takeoverMs)} ms to take over from a dead holder (lease ${ttlMs} ms)`,
      );
      await sleep(100);
      await first.worker.process.call('release', { key });
      const second = await Promise.all(waits).then((both) => both.find((b) => b !== first)!);
      await second.worker.process.call('release', { key });

      // The orphan's lease must have ended, by the server clock, once lease + margin passed.
      await sleep(Math.max(0, diedAt + ttlMs + takeoverMarginMs - sharedClockMs()) + 10);
      const violations = await run.check(
        { leaseMs: ttlMs, expiryMarginMs: takeoverMarginMs },
        expect.violations,
      );
      return {
        operations: run.history.sections.length + 1,
        violations,
        notes: `takeover ${Math.round(takeoverMs)} ms after SIGKILL (lease ${ttlMs} ms)`,
      };
    } finally {
      await run.stop();
    }
  },
};
