import { FaultRun } from '../harness/fault-run';
import { Expectations, sleep, type Scenario } from './scenario';

const ttlMs = 1500;
const takeoverMarginMs = 3000;
const frozenAfterTakeoverMs = 500;

/**
 * A renewing holder is frozen with SIGSTOP past its lease while another process takes over and
 * writes to a fenced resource; on SIGCONT the old holder must learn of the loss (signal and
 * lost$), its late fenced write must be refused, and the resource must keep the new holder's
 * work. This is the pattern users should follow: fence every write the lock protects.
 */
export const holderPaused: Scenario = {
  name: '3. holder paused with SIGSTOP past its lease',
  async run(server) {
    const run = new FaultRun(server, 'paused');
    const expect = new Expectations();
    const key = 'paused:resource';
    try {
      const [sleeper, successor] = await run.spawn([{ label: 'sleeper' }, { label: 'successor' }]);
      const oldLease = await run.hold(sleeper, { key, ttlMs, timeoutMs: 5000, renew: true });
      const before = await sleeper.process.call('fencedWrite', {
        key,
        value: 'sleeper: before pause',
      });
      expect.that(before.accepted, key, 'the first fenced write, under a live lease, was refused');

      const takeover = run.hold(successor, { key, ttlMs, timeoutMs: 30_000, renew: true });
      await sleep(200);
      // Recorded in the history: the pause is what excuses the sleeper's late notice.
      const pausedAt = run.pause(sleeper);
      const newLease = await takeover;
      expect.that(
        newLease.start - pausedAt <= ttlMs + takeoverMarginMs,
        key,
        `successor waited ${Math.round(newLease.start - pausedAt)} ms for a frozen holder's lease`,
      );
      expect.that(
        BigInt(newLease.fence) > BigInt(oldLease.fence),
        key,
        `successor's fence ${newLease.fence} is not above the frozen holder's ${oldLease.fence}`,
      );
      const write = await successor.process.call('fencedWrite', { key, value: 'successor' });
      expect.that(write.accepted, key, "the successor's fenced write was refused");

      // Frozen well past the takeover, its notice comes later than any timer tolerance allows:
      // only the recorded pause excuses it (the checker's 'told-late').
      await sleep(frozenAfterTakeoverMs);
      run.resume(sleeper);
      const loss = await sleeper.process.call('waitForLoss', { key, timeoutMs: 10_000 });
      expect.that(
        loss.signalAt !== null,
        key,
        'the resumed holder was not told through its signal',
      );
      expect.that(loss.lostAt !== null, key, 'the resumed holder was not told through lost$');
      const late = await sleeper.process.call('fencedWrite', { key, value: 'sleeper: after loss' });
      expect.that(!late.accepted, key, "the stale holder's fenced write was accepted");
      const released = await sleeper.process.call('release', { key });
      expect.that(released.outcome === 'lost', key, 'the stale holder released a lost lock');
      await successor.process.call('release', { key });

      const resource = await run.readResource(key);
      expect.that(
        resource?.writer === 'successor',
        key,
        `resource last written by ${resource?.writer}`,
      );
      expect.that(
        JSON.stringify(resource?.history.map((h) => h.value)) ===
          JSON.stringify(['sleeper: before pause', 'successor']),
        key,
        `resource history ${JSON.stringify(resource?.history.map((h) => h.value))}`,
      );
      const violations = await run.check({ leaseMs: ttlMs }, expect.violations);
      const heardAfter = Math.round((loss.signalAt ?? Number.NaN) - newLease.start);
      return {
        operations: 4,
        violations,
        notes: `stale write refused; loss signalled ${heardAfter} ms after the takeover`,
      };
    } finally {
      await run.stop();
    }
  },
};
