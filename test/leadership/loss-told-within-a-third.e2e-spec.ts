/**
 * Promised (docs/leadership.md, Guarantees, "A forced release is an override"): a leader on
 * another instance learns of a `forceRelease()` of its key "when its instance hears the command
 * on its change stream (else at its next renewal, within a third of `ttlMs`)"; and under
 * Failover, "a renewal every third of the lease".
 *
 * The case: `renewal: { intervalRatio: 0.9 }` and no change stream. A term renews at most a
 * third into its lease whatever the module's ratio (`renewalIntervalRatio` of the leadership
 * host, lib/lock.service.ts); it used to renew at the module's ratio, so a leader whose key an
 * operator freed went on believing it led for about 0.85 * ttlMs (10.2 s of a 12 s lease).
 */
import type { LeaderTerm } from '../../lib/leadership/leader-term';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { eventually, LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(40_000);

describe('leadership: a forced release is told within a third of ttlMs', () => {
  const kit = LockTestKit.forSuite();

  it('a leader without a change stream learns of an operator release within a third of ttlMs, whatever renewal.intervalRatio', async () => {
    const ttlMs = 12_000;
    const renewal = { intervalRatio: 0.9 };
    const a = await kit.service({ holderId: 'A', changeStreams: 'off', renewal });
    const b = await kit.service({ holderId: 'B', renewal });
    const operator = await kit.service({ holderId: 'OP' });
    const key = `${LEADER_KEY_PREFIX}override`;
    const term = await a.leadership('override', { ttlMs }).campaign();
    let next: LeaderTerm | undefined;
    void b
      .leadership('override', { ttlMs })
      .campaign()
      .then((t) => (next = t));
    await eventually(async () => (await operator.inspect(key))?.waiting === 1);

    const freedAt = performance.now();
    const freed = await operator.forceRelease(key);
    expect(freed.map((holder) => holder.fence)).toEqual([term.fence]);
    // The next candidate leads at once: from here two instances think they lead until A is told.
    await eventually(() => next !== undefined);
    await eventually(() => term.signal.aborted, ttlMs);
    const toldAfterMs = performance.now() - freedAt;

    // Documented: within a third of ttlMs (4 s). Broken: at the renewal 0.85 * ttlMs in (10.2 s).
    expect(toldAfterMs).toBeLessThan(ttlMs / 3 + LOAD_SLACK_MS);
    expect(next!.fence).toBeGreaterThan(term.fence);
  });
});
