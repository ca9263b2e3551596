import { LockStoreUnavailableError } from './errors';
import { LeaseKeeper, leaseSafetyMarginMs, localLeaseEnd } from './lease-keeper';
import type { HeldKey, LeaseKeeperInit, LeaseOperations } from './lease-keeper';
import type { ReleaseLeaseOutcome } from './lease-keeper';
import type { RenewLeaseOutcome } from './lease-keeper';

const TTL_MS = 10_000;
/** 5 % of TTL_MS. */
const MARGIN_MS = 500;

const heldKey = (key: string): HeldKey => ({ key, owner: 'token', fence: 1n });

/** The store operations, recorded; by default every renewal and release succeeds. */
class FakeLeases implements LeaseOperations {
  readonly renewed: { key: string; ttlMs: number; at: number }[] = [];
  readonly released: string[] = [];
  renewReply: (held: HeldKey, ttlMs: number) => Promise<RenewLeaseOutcome> = async (
    _held,
    ttlMs,
  ) => ({ renewed: true, sentAt: performance.now(), remainingMs: ttlMs });
  releaseReply: (held: HeldKey) => Promise<ReleaseLeaseOutcome> = async () => 'released';

  renew = (held: HeldKey, ttlMs: number): Promise<RenewLeaseOutcome> => {
    this.renewed.push({ key: held.key, ttlMs, at: performance.now() });
    return this.renewReply(held, ttlMs);
  };

  release = (held: HeldKey): Promise<ReleaseLeaseOutcome> => {
    this.released.push(held.key);
    return this.releaseReply(held);
  };

  ended = (): void => undefined;
  giveBack = async (): Promise<ReleaseLeaseOutcome | undefined> => 'released';
}

function setUp(
  init: Partial<Omit<LeaseKeeperInit, 'operations' | 'onLost'>> = {},
  /** The first renewals' replies, when they must differ from the start. */
  renewReply?: FakeLeases['renewReply'],
) {
  const leases = new FakeLeases();
  if (renewReply) leases.renewReply = renewReply;
  const lost: { key: string; reason: string; cause: unknown; at: number }[] = [];
  const start = performance.now();
  const keeper = new LeaseKeeper({
    held: [heldKey('a')],
    leaseEnd: start + TTL_MS,
    ttlMs: TTL_MS,
    renew: true,
    renewalIntervalRatio: 0.5,
    maxHoldMs: 3_600_000,
    ...init,
    operations: leases,
    onLost: (key, reason, cause) => lost.push({ key, reason, cause, at: performance.now() }),
  });
  return { keeper, leases, lost, start };
}

/** Advances fake time, running the timers and the promise callbacks they lead to. */
const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);

describe('LeaseKeeper', () => {
  let keeper: LeaseKeeper | undefined;

  beforeEach(() => {
    jest.useFakeTimers();
  });

  afterEach(() => {
    keeper?.stop();
    keeper = undefined;
    jest.useRealTimers();
  });

  /** setUp, remembering the keeper so it is stopped after the test. */
  function keep(init?: Parameters<typeof setUp>[0], renewReply?: FakeLeases['renewReply']) {
    const parts = setUp(init, renewReply);
    keeper = parts.keeper;
    return parts;
  }

  describe('the safety margin', () => {
    it('is 5 % of the lease, between 25 ms and 1 s', () => {
      expect(leaseSafetyMarginMs(10_000)).toBe(500);
      expect(leaseSafetyMarginMs(100)).toBe(25);
      expect(leaseSafetyMarginMs(60_000)).toBe(1_000);
    });

    it('is taken off the remaining lease, counted from before the request was sent', () => {
      expect(localLeaseEnd(100, 5_000, 10_000)).toBe(100 + 5_000 - 500);
    });
  });

  describe('renewal', () => {
    it('renews at renewalIntervalRatio of the lease', async () => {
      const { leases, start } = keep({ renewalIntervalRatio: 0.4 });
      await advance(3_999);
      expect(leases.renewed).toHaveLength(0);
      await advance(1);
      expect(leases.renewed).toEqual([{ key: 'a', ttlMs: TTL_MS, at: start + 4_000 }]);
    });

    it('counts the interval back from the lease end, so a partly used lease is renewed sooner', async () => {
      const { leases, start } = keep({ leaseEnd: performance.now() + 6_000 });
      await advance(999);
      expect(leases.renewed).toHaveLength(0);
      await advance(1);
      expect(leases.renewed).toEqual([{ key: 'a', ttlMs: TTL_MS, at: start + 1_000 }]);
    });

    it('takes the new lease end from the reply, less the safety margin, and schedules from it', async () => {
      const { keeper, leases, lost, start } = keep();
      await advance(5_000);
      expect(leases.renewed).toHaveLength(1);
      // Renewed at start + 5000 for 10 s: the local end is 500 ms before the server's.
      expect(keeper.leaseEnd).toBe(start + 5_000 + TTL_MS - MARGIN_MS);
      // The next renewal comes at half a lease before that end: 4500 ms later.
      await advance(4_499);
      expect(leases.renewed).toHaveLength(1);
      await advance(1);
      expect(leases.renewed.map((renewal) => renewal.at)).toEqual([start + 5_000, start + 9_500]);
      expect(lost).toEqual([]);
    });

    it('applies the margin to the remaining lease the server reports', async () => {
      const { keeper, leases, lost, start } = keep({ renew: false });
      leases.renewReply = async () => ({ renewed: true, sentAt: start + 10, remainingMs: 2_000 });
      await keeper.renewNow(undefined);
      expect(keeper.leaseEnd).toBe(start + 10 + 2_000 - MARGIN_MS);
      await advance(1_509);
      expect(lost).toEqual([]);
      await advance(1);
      expect(lost).toMatchObject([{ key: 'a', at: start + 1_510 }]);
    });

    it('renews every key with a new ttlMs passed to renewNow, and keeps it for later renewals', async () => {
      const { keeper, leases } = keep({ held: [heldKey('a'), heldKey('b')] });
      await keeper.renewNow(20_000);
      expect(leases.renewed.map(({ key, ttlMs }) => [key, ttlMs])).toEqual([
        ['a', 20_000],
        ['b', 20_000],
      ]);
      // Local end 20000 - 1000 ms ahead: the next renewal comes half a lease before it.
      await advance(8_999);
      expect(leases.renewed).toHaveLength(2);
      await advance(1);
      expect(leases.renewed.slice(2).map(({ ttlMs }) => ttlMs)).toEqual([20_000, 20_000]);
    });
  });

  describe('losing the lease', () => {
    it('is reported once, with the refused key, when a renewal is refused', async () => {
      const { leases, lost } = keep({ held: [heldKey('a'), heldKey('b')] });
      leases.renewReply = async (held) =>
        held.key === 'b'
          ? { renewed: false, sentAt: performance.now() }
          : { renewed: true, sentAt: performance.now(), remainingMs: TTL_MS };
      await advance(5_000);
      expect(lost).toMatchObject([{ key: 'b', reason: expect.stringMatching(/another holder/) }]);
      await advance(60_000);
      expect(lost).toHaveLength(1);
      expect(leases.renewed).toHaveLength(2);
    });

    it('retries a renewal that failed transiently, and keeps the lease when a retry succeeds', async () => {
      const { keeper, leases, lost, start } = keep();
      leases.renewReply = async (_held, ttlMs) => {
        if (leases.renewed.length === 1) throw new LockStoreUnavailableError('no primary');
        return { renewed: true, sentAt: performance.now(), remainingMs: ttlMs };
      };
      await advance(5_250);
      expect(leases.renewed.map((renewal) => renewal.at)).toEqual([start + 5_000, start + 5_250]);
      expect(keeper.leaseEnd).toBe(start + 5_250 + TTL_MS - MARGIN_MS);
      await advance(TTL_MS);
      expect(lost).toEqual([]);
    });

    it('retries transient failures until the local deadline, which then loses the lease', async () => {
      const { leases, lost, start } = keep();
      leases.renewReply = async () => {
        throw new LockStoreUnavailableError('no primary');
      };
      await advance(TTL_MS - 1);
      expect(lost).toEqual([]);
      // Every 250 ms from the first renewal on, and more often just before the end.
      expect(leases.renewed.length).toBeGreaterThanOrEqual(20);
      await advance(1);
      expect(lost).toMatchObject([
        { key: 'a', reason: expect.stringMatching(/ran out/), at: start + TTL_MS },
      ]);
      const renewals = leases.renewed.length;
      await advance(60_000);
      expect(lost).toHaveLength(1);
      expect(leases.renewed).toHaveLength(renewals);
    });

    it('loses the lease at once when a renewal fails for good', async () => {
      const { leases, lost, start } = keep();
      const failure = new Error('not authorized');
      leases.renewReply = async () => {
        throw failure;
      };
      await advance(5_000);
      expect(lost).toMatchObject([{ key: 'a', cause: failure, at: start + 5_000 }]);
      await advance(60_000);
      expect(lost).toHaveLength(1);
      expect(leases.renewed).toHaveLength(1);
    });

    it('loses the lease at the local deadline when no renewal is made', async () => {
      const { lost, start } = keep({ renew: false });
      await advance(TTL_MS - 1);
      expect(lost).toEqual([]);
      await advance(1);
      expect(lost).toMatchObject([{ key: 'a', at: start + TTL_MS }]);
      // Nothing was to renew it: the reason says so, and what to do, not 'before it was renewed'.
      expect(lost[0].reason).toBe(
        'its lease (ttlMs) ran out, and it was taken without renewal (as acquire and tryAcquire ' +
          'take a lock unless given renew: true); give renew: true or a longer ttlMs, or call ' +
          'extend() in time',
      );
    });

    it('loses the lease at the local deadline when a renewal does not answer', async () => {
      const { leases, lost, start } = keep();
      leases.renewReply = () => new Promise(() => undefined);
      await advance(TTL_MS);
      expect(leases.renewed).toHaveLength(1);
      expect(lost).toMatchObject([
        { key: 'a', at: start + TTL_MS, reason: 'its lease ran out before it was renewed' },
      ]);
    });

    it('loses the lease when a renewal is answered after it ended, before its deadline timer ran', async () => {
      const { leases, lost, start } = keep();
      let answer!: () => void;
      leases.renewReply = (_held, ttlMs) => {
        const sentAt = performance.now();
        return new Promise((resolve) => {
          answer = () => resolve({ renewed: true, sentAt, remainingMs: ttlMs });
        });
      };
      await advance(5_000);
      expect(leases.renewed).toHaveLength(1);
      // A stalled event loop: the clock passes the lease's end before any timer runs, and the
      // reply is read first. It may have landed after the end: it proves nothing.
      const late = jest.spyOn(performance, 'now').mockReturnValue(start + TTL_MS + 1_000);
      answer();
      await Promise.resolve();
      await Promise.resolve();
      late.mockRestore();
      expect(lost).toMatchObject([{ key: 'a', reason: expect.stringMatching(/ran out/) }]);
    });

    it('loses the lease after maxHoldMs even while renewals succeed', async () => {
      const { leases, lost, start } = keep({ maxHoldMs: 12_000 });
      await advance(11_999);
      expect(lost).toEqual([]);
      await advance(1);
      expect(lost).toMatchObject([
        { key: 'a', reason: expect.stringMatching(/maxHoldMs/), at: start + 12_000 },
      ]);
      const renewals = leases.renewed.length;
      await advance(60_000);
      expect(leases.renewed).toHaveLength(renewals);
      expect(lost).toHaveLength(1);
    });
  });

  describe('releaseAll', () => {
    const threeKeys = { held: [heldKey('a'), heldKey('b'), heldKey('c')] };

    it('releases the last key taken first, stops renewing, and returns the keys found lost', async () => {
      const { keeper, leases, lost } = keep(threeKeys);
      leases.releaseReply = async (held) =>
        held.key === 'b' ? 'lost' : held.key === 'a' ? 'expired' : 'released';
      await expect(keeper.releaseAll()).resolves.toEqual(['b', 'a']);
      expect(leases.released).toEqual(['c', 'b', 'a']);
      expect(keeper.unreleased).toEqual([]);
      await advance(60_000);
      expect(leases.renewed).toEqual([]);
      // Released: the deadline no longer fires.
      expect(lost).toEqual([]);
    });

    it('sends the release of every key before any is answered', async () => {
      const { keeper, leases } = keep(threeKeys);
      const answers: (() => void)[] = [];
      leases.releaseReply = () => new Promise((resolve) => answers.push(() => resolve('released')));
      const releasing = keeper.releaseAll();
      await Promise.resolve();
      expect(leases.released).toEqual(['c', 'b', 'a']);
      for (const answer of answers) answer();
      await expect(releasing).resolves.toEqual([]);
    });

    it('keeps the deadline armed when a release fails, so the loss is still reported', async () => {
      const { keeper, leases, lost, start } = keep(threeKeys);
      const failure = new LockStoreUnavailableError('no primary');
      leases.releaseReply = async (held) => {
        if (held.key === 'b') throw failure;
        return 'released';
      };
      await expect(keeper.releaseAll()).rejects.toBe(failure);
      expect(leases.released).toEqual(['c', 'b', 'a']);
      expect(keeper.unreleased.map((held) => held.key)).toEqual(['b']);
      await advance(TTL_MS - 1);
      expect(lost).toEqual([]);
      expect(leases.renewed).toEqual([]);
      await advance(1);
      expect(lost).toMatchObject([{ at: start + TTL_MS }]);
    });

    it('retries only the keys not yet released, and then the deadline no longer fires', async () => {
      const { keeper, leases, lost } = keep(threeKeys);
      let failing = true;
      leases.releaseReply = async (held) => {
        if (held.key === 'b' && failing) throw new LockStoreUnavailableError('no primary');
        return 'released';
      };
      await expect(keeper.releaseAll()).rejects.toBeInstanceOf(LockStoreUnavailableError);
      failing = false;
      leases.released.length = 0;
      await expect(keeper.releaseAll()).resolves.toEqual([]);
      expect(leases.released).toEqual(['b']);
      await advance(60_000);
      expect(lost).toEqual([]);
    });

    it('waits for a renewal in flight before releasing', async () => {
      const { keeper, leases } = keep();
      let answer!: () => void;
      leases.renewReply = (_held, ttlMs) =>
        new Promise((resolve) => {
          answer = () => resolve({ renewed: true, sentAt: performance.now(), remainingMs: ttlMs });
        });
      await advance(5_000);
      const releasing = keeper.releaseAll();
      await advance(0);
      expect(leases.released).toEqual([]);
      answer();
      await expect(releasing).resolves.toEqual([]);
      expect(leases.released).toEqual(['a']);
    });
  });

  describe('one renewal at a time', () => {
    it('a scheduled renewal waits for an extend() in flight, and replies match the keys sent', async () => {
      const { keeper, leases, lost } = keep({ held: [heldKey('a'), heldKey('b')] });
      let answerExtend: (() => void) | undefined;
      leases.renewReply = (held, ttlMs) =>
        new Promise((resolve) => {
          const reply = () =>
            resolve({ renewed: true, sentAt: performance.now(), remainingMs: ttlMs });
          if (held.key === 'b') answerExtend = reply;
          else reply();
        });
      await advance(4_990);
      const extending = keeper.renewNow(undefined);
      await advance(20); // the renewal timer (due at 5 000 ms) fires while extend() waits
      expect(leases.renewed.map((renewal) => renewal.key)).toEqual(['a', 'b']);
      answerExtend?.();
      await expect(extending).resolves.toBe(true);
      await advance(0);
      expect(lost).toEqual([]);
    });
  });

  describe('stopping', () => {
    it('stopRenewal() renews no more but keeps the deadline', async () => {
      const { keeper, leases, lost, start } = keep();
      keeper.stopRenewal();
      await advance(TTL_MS);
      expect(leases.renewed).toEqual([]);
      expect(lost).toMatchObject([{ key: 'a', at: start + TTL_MS }]);
    });

    it('pauseRenewal() renews nothing until resumed, and then only a lease kept by renewals', async () => {
      const renewed = keep();
      const resume = renewed.keeper.pauseRenewal();
      await advance(TTL_MS / 2);
      expect(renewed.leases.renewed).toEqual([]);
      resume();
      await advance(1);
      expect(renewed.leases.renewed).toHaveLength(1);
      renewed.keeper.stop();
      // `renew: false` (a locked transaction of withLock): resuming schedules no renewal.
      const { keeper, leases, lost, start } = keep({ renew: false });
      keeper.pauseRenewal()();
      await advance(TTL_MS);
      expect(leases.renewed).toEqual([]);
      expect(lost).toMatchObject([{ key: 'a', at: start + TTL_MS }]);
    });

    it('stop() clears the renewal, the deadline and maxHoldMs', async () => {
      const { keeper, leases, lost } = keep({ maxHoldMs: 2_000 });
      keeper.stop();
      await advance(60_000);
      expect(leases.renewed).toEqual([]);
      expect(lost).toEqual([]);
    });
  });
});
