import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { FaultRun } from '../harness/fault-run';
import { Expectations, sleep, type Scenario } from './scenario';

const ttlMs = 3000;
const stepDownSecs = 2;

/**
 * The primary steps down (simulated by the offline server: writes refused and cursors killed
 * for a while) while two holders renew and two waiters wait on change streams. Everyone must
 * recover: holders keep their lease or are told they lost it, waiters get the lock once it is
 * released, and all four processes then contend normally.
 */
export const stepDown: Scenario = {
  name: '5. primary step-down while holding and waiting',
  async run(server) {
    const run = new FaultRun(server, 'stepdown');
    const expect = new Expectations();
    try {
      const [h1, h2, w1, w2] = await run.spawn(
        ['holder1', 'holder2', 'waiter1', 'waiter2'].map((label) => ({ label })),
      );
      const pairs = [
        { holder: h1, waiter: w1, key: 'stepdown:1' },
        { holder: h2, waiter: w2, key: 'stepdown:2' },
      ];
      for (const { holder, key } of pairs) {
        await run.hold(holder, { key, ttlMs, timeoutMs: 5000, renew: true });
      }
      const waits = pairs.map(({ waiter, key }) =>
        run.hold(waiter, { key, ttlMs, timeoutMs: 40_000, renew: true }),
      );
      await sleep(500);
      await run.admin.db('admin').command({ replSetStepDown: stepDownSecs, force: true });
      // Through the step-down and the elections that follow, then a little renewing.
      await sleep(stepDownSecs * 1000 + 2500);
      const outcomes: string[] = [];
      for (const { holder, key } of pairs) {
        const { outcome } = await holder.process.call('release', { key });
        outcomes.push(outcome);
      }
      const acquired = await Promise.allSettled(waits);
      acquired.forEach((result, i) => {
        expect.that(
          result.status === 'fulfilled',
          pairs[i].key,
          `waiter did not get the lock after the step-down: ${String((result as PromiseRejectedResult).reason)}`,
        );
      });
      for (const [i, result] of acquired.entries()) {
        if (result.status === 'fulfilled') {
          await pairs[i].waiter.process.call('release', { key: pairs[i].key });
        }
      }

      const stopAt = sharedClockMs() + 4000;
      const after = await Promise.all(
        [h1, h2, w1, w2].map((w) =>
          w.process.call('contend', {
            keys: ['stepdown:1', 'stepdown:2'],
            workers: 2,
            ttlMs: 1000,
            timeoutMs: 20_000,
            hold: { shortMaxMs: 10, longShare: 0, longMinMs: 0, longMaxMs: 0 },
            renewShare: 0.5,
            stopAt,
            maxSections: 500,
          }),
        ),
      );
      const afterSections = after.reduce((n, s) => n + s.sections, 0);
      const errors = after.flatMap((s) => s.errors);
      expect.that(errors.length === 0, '*', `errors after the step-down: ${errors.join('; ')}`);
      expect.that(afterSections > 0, '*', 'no critical section completed after the step-down');
      const violations = await run.check({ leaseMs: ttlMs }, expect.violations);
      return {
        operations: run.history.sections.length,
        violations,
        notes: `holders: ${outcomes.join(', ')}; ${afterSections} sections after`,
      };
    } finally {
      await run.stop();
    }
  },
};
