import { LockLostError, LockStoreUnavailableError, MongoLockError } from './errors';
import type { HeldKey, LeaseOperations } from './lease-keeper';
import { MongoLockHandle } from './lock-handle';
import type { RenewLeaseOutcome } from './lease-keeper';

const TTL_MS = 10_000;

/** The store operations, logged in call order with the lease asked for; all succeed by default. */
class FakeLeases implements LeaseOperations {
  readonly log: string[] = [];
  renewReply: (held: HeldKey) => Promise<RenewLeaseOutcome> = async () => ({
    renewed: true,
    sentAt: performance.now(),
    remainingMs: TTL_MS,
  });

  renew = (held: HeldKey, ttlMs: number): Promise<RenewLeaseOutcome> => {
    this.log.push(`renew ${held.key} ${ttlMs}`);
    return this.renewReply(held);
  };

  release = async (held: HeldKey) => {
    this.log.push(`release ${held.key}`);
    return 'released' as const;
  };

  ended = (): void => undefined;
  giveBack = async (held: HeldKey) => {
    this.log.push(`giveBack ${held.key}`);
    return 'released' as const;
  };
}

function setUp(keys = ['a'], renew = false) {
  const leases = new FakeLeases();
  const handle = new MongoLockHandle({
    held: keys.map((key, index) => ({ key, owner: 'token', fence: BigInt(index + 1) })),
    leaseEnd: performance.now() + TTL_MS,
    ttlMs: TTL_MS,
    renew,
    renewalIntervalRatio: 0.5,
    maxHoldMs: 3_600_000,
    operations: leases,
  });
  handle.signal.addEventListener('abort', () => leases.log.push('abort'));
  return { handle, leases };
}

describe('MongoLockHandle.expireIn (minHoldMs)', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  it('renews every key once for the time left, then counts as released without a release', async () => {
    const { handle, leases } = setUp(['a', 'b']);
    await handle.expireIn(1_234.2);
    expect(leases.log).toEqual(['renew a 1235', 'renew b 1235']);
    expect(handle.released).toBe(true);
    await handle.release();
    await jest.advanceTimersByTimeAsync(TTL_MS * 2);
    // No release command, no renewal, and no loss reported when the lease runs out.
    expect(leases.log).toEqual(['renew a 1235', 'renew b 1235']);
    expect(handle.lost).toBe(false);
    await expect(handle.done).resolves.toBeUndefined();
  });

  it('stops renewing: a renewal due later is never sent', async () => {
    const { handle, leases } = setUp(['a'], true);
    await handle.expireIn(500);
    await jest.advanceTimersByTimeAsync(TTL_MS * 3);
    expect(leases.log).toEqual(['renew a 500']);
  });

  it('reports a refused renewal as LockLostError: the lease had ended or changed hands', async () => {
    const { handle, leases } = setUp(['a']);
    leases.renewReply = async () => ({ renewed: false, sentAt: performance.now() });
    await expect(handle.expireIn(500)).rejects.toThrow(LockLostError);
    expect(handle.lost).toBe(true);
    expect(handle.signal.aborted).toBe(true);
    await expect(handle.release()).rejects.toThrow(LockLostError);
    expect(leases.log).toEqual(['renew a 500', 'abort']);
  });

  it('passes a store failure on, and holds nothing after it', async () => {
    const { handle, leases } = setUp(['a']);
    leases.renewReply = async () => {
      throw new LockStoreUnavailableError('no primary');
    };
    await expect(handle.expireIn(500)).rejects.toThrow(LockStoreUnavailableError);
    expect(handle.released).toBe(true);
    await expect(handle.release()).resolves.toBeUndefined();
    expect(leases.log).toEqual(['renew a 500']);
  });

  it('makes a release asked for meanwhile wait for it and send nothing', async () => {
    const { handle, leases } = setUp(['a']);
    let answer!: () => void;
    leases.renewReply = () =>
      new Promise((resolve) => {
        answer = () => resolve({ renewed: true, sentAt: performance.now(), remainingMs: 500 });
      });
    const expiring = handle.expireIn(500);
    const releasing = handle.release();
    await jest.advanceTimersByTimeAsync(0);
    answer();
    await expect(expiring).resolves.toBeUndefined();
    await expect(releasing).resolves.toBeUndefined();
    expect(leases.log).toEqual(['renew a 500']);
  });

  it('refuses a handle that is lost or already released', async () => {
    const lost = setUp(['a']);
    lost.leases.renewReply = async () => ({ renewed: false, sentAt: performance.now() });
    await lost.handle.extend().catch(() => undefined);
    await expect(lost.handle.expireIn(500)).rejects.toThrow(LockLostError);

    const released = setUp(['a']);
    await released.handle.release();
    await expect(released.handle.expireIn(500)).rejects.toThrow(MongoLockError);
  });

  it('bounds the lease it asks for: at least 1 ms, at most the longest timer', async () => {
    const { handle, leases } = setUp(['a']);
    await handle.expireIn(0.2);
    const other = setUp(['b']);
    await other.handle.expireIn(2 ** 40);
    expect([...leases.log, ...other.leases.log]).toEqual(['renew a 1', 'renew b 2147483647']);
  });
});

describe('MongoLockHandle after a pause', () => {
  afterEach(() => jest.restoreAllMocks());

  it('reads as lost as soon as its local deadline has passed, before the deadline timer runs', () => {
    const { handle, leases } = setUp(['a']);
    expect(handle.signal.aborted).toBe(false);
    // The process was paused past the deadline: the clock moved, no timer has run yet.
    const resumedAt = performance.now() + TTL_MS + 1;
    jest.spyOn(performance, 'now').mockReturnValue(resumedAt);
    expect(handle.signal.aborted).toBe(true);
    expect(handle.lost).toBe(true);
    expect(handle.lostReason).toBeInstanceOf(LockLostError);
    expect(leases.log).toEqual(['abort']);
  });

  it('a signal kept by the work is aborted at its first look after the pause', () => {
    const { handle, leases } = setUp(['a']);
    const kept = handle.signal;
    jest.spyOn(performance, 'now').mockReturnValue(performance.now() + TTL_MS + 1);
    expect(() => kept.throwIfAborted()).toThrow(LockLostError);
    expect(kept.aborted).toBe(true);
    expect(kept.reason).toBeInstanceOf(LockLostError);
    expect(leases.log).toEqual(['abort']);
  });

  it('a released handle is not reported lost when read after its deadline', async () => {
    const { handle } = setUp(['a']);
    await handle.release();
    jest.spyOn(performance, 'now').mockReturnValue(performance.now() + TTL_MS + 1);
    expect(handle.lost).toBe(false);
    expect(handle.signal.aborted).toBe(false);
    expect(handle.signal.reason).toBeUndefined();
  });
});
