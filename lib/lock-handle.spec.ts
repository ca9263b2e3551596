import { LockLostError, LockStoreUnavailableError, MongoLockError } from './errors';
import type { HeldKey, LeaseOperations } from './lease-keeper';
import { MongoLockHandle } from './lock-handle';
import type { ReleaseLeaseOutcome } from './lease-keeper';
import type { RenewLeaseOutcome } from './lease-keeper';

const TTL_MS = 10_000;

/** The store operations, logged in call order; by default everything succeeds. */
class FakeLeases implements LeaseOperations {
  readonly log: string[] = [];
  renewReply: (held: HeldKey) => Promise<RenewLeaseOutcome> = async () => ({
    renewed: true,
    sentAt: performance.now(),
    remainingMs: TTL_MS,
  });
  releaseReply: (held: HeldKey) => Promise<ReleaseLeaseOutcome> = async () => 'released';
  giveBackReply: (held: HeldKey) => Promise<ReleaseLeaseOutcome | undefined> = async () =>
    'released';

  renew = (held: HeldKey): Promise<RenewLeaseOutcome> => {
    this.log.push(`renew ${held.key}`);
    return this.renewReply(held);
  };

  release = (held: HeldKey): Promise<ReleaseLeaseOutcome> => {
    this.log.push(`release ${held.key}`);
    return this.releaseReply(held);
  };

  ended = (): void => undefined;
  giveBack = (held: HeldKey): Promise<ReleaseLeaseOutcome | undefined> => {
    this.log.push(`giveBack ${held.key}`);
    return this.giveBackReply(held);
  };
}

function setUp(keys = ['a'], ttlMs = TTL_MS, renew = false) {
  const leases = new FakeLeases();
  const handle = new MongoLockHandle({
    held: keys.map((key, index) => ({ key, owner: 'token', fence: BigInt(index + 1) })),
    leaseEnd: performance.now() + ttlMs,
    ttlMs,
    renew,
    renewalIntervalRatio: 0.5,
    maxHoldMs: 3_600_000,
    operations: leases,
  });
  const emitted: LockLostError[] = [];
  let completed = false;
  handle.lost$.subscribe({
    next: (error) => emitted.push(error),
    complete: () => (completed = true),
  });
  handle.signal.addEventListener('abort', () => leases.log.push('abort'));
  return { handle, leases, emitted, isCompleted: () => completed };
}

/** Where a promise stands once the callbacks already due have run. */
async function stateOf(promise: Promise<unknown>): Promise<'pending' | 'resolved' | 'rejected'> {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  promise.then(
    () => (state = 'resolved'),
    () => (state = 'rejected'),
  );
  await jest.advanceTimersByTimeAsync(0);
  return state;
}

const never = () => new Promise<never>(() => undefined);

describe('MongoLockHandle', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  describe('release()', () => {
    it('settles the handle: released, done resolves, lost$ completes without emitting', async () => {
      const { handle, leases, emitted, isCompleted } = setUp(['a', 'b']);
      await handle.release();
      expect(leases.log).toEqual(['release b', 'release a']);
      expect(handle.released).toBe(true);
      expect(handle.lost).toBe(false);
      expect(handle.signal.aborted).toBe(false);
      await expect(stateOf(handle.done)).resolves.toBe('resolved');
      expect(emitted).toEqual([]);
      expect(isCompleted()).toBe(true);
      // Settled: later calls resolve without a store call, and the deadline is gone.
      await handle.release();
      await jest.advanceTimersByTimeAsync(60_000);
      expect(leases.log).toEqual(['release b', 'release a']);
      expect(handle.signal.aborted).toBe(false);
    });

    it('rejects with LockLostError and aborts the signal when the key was found lost', async () => {
      const { handle, leases, emitted } = setUp(['a', 'b']);
      leases.releaseReply = async (held) => (held.key === 'a' ? 'lost' : 'released');
      const error = await handle.release().catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(LockLostError);
      expect(error).toMatchObject({ key: 'a' });
      expect(handle.signal.aborted).toBe(true);
      expect(handle.signal.reason).toBe(error);
      expect(emitted).toEqual([error]);
      expect(handle.lost).toBe(true);
      await expect(handle.release()).rejects.toBe(error);
    });

    it('rejects with LockStoreUnavailableError, gives the keys left back, and aborts the signal at the deadline if none answers', async () => {
      const { handle, leases, emitted } = setUp(['a', 'b']);
      const failure = new LockStoreUnavailableError('no primary');
      leases.releaseReply = async (held) => {
        if (held.key === 'a') throw failure;
        return 'released';
      };
      leases.giveBackReply = never;
      await expect(handle.release()).rejects.toBe(failure);
      expect(leases.log).toEqual(['release b', 'release a', 'giveBack a']);
      // No longer held (shutdown does not wait for it), but not known to be released.
      await expect(stateOf(handle.done)).resolves.toBe('resolved');
      expect(handle.released).toBe(false);
      expect(handle.lost).toBe(false);
      expect(handle.signal.aborted).toBe(false);
      // A later call sends nothing more while the give-back goes on.
      await expect(handle.release()).rejects.toBe(failure);
      expect(leases.log).toEqual(['release b', 'release a', 'giveBack a']);
      await jest.advanceTimersByTimeAsync(TTL_MS - 1);
      expect(handle.signal.aborted).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      expect(handle.signal.aborted).toBe(true);
      expect(handle.signal.reason).toBeInstanceOf(LockLostError);
      expect(emitted).toHaveLength(1);
    });

    it.each([
      ['released', 'resolves'],
      ['lost', 'rejects'],
    ] as const)(
      'after a failed release, a give-back answered %s settles the handle; later calls %s',
      async (outcome, later) => {
        const { handle, leases, emitted } = setUp(['a', 'b']);
        leases.releaseReply = async (held) => {
          if (held.key === 'a') throw new LockStoreUnavailableError('no primary');
          return 'released';
        };
        leases.giveBackReply = async () => outcome;
        await expect(handle.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);
        await jest.advanceTimersByTimeAsync(0);
        // Found gone, the lease is reported lost, as a confirmed release finding it gone would.
        const log = [
          'release b',
          'release a',
          'giveBack a',
          ...(later === 'rejects' ? ['abort'] : []),
        ];
        expect(leases.log).toEqual(log);
        expect(handle.released).toBe(true);
        if (later === 'resolves') await expect(handle.release()).resolves.toBeUndefined();
        else await expect(handle.release()).rejects.toBeInstanceOf(LockLostError);
        await jest.advanceTimersByTimeAsync(60_000);
        expect(emitted).toHaveLength(later === 'resolves' ? 0 : 1);
        expect(leases.log).toEqual(log);
      },
    );

    it('on a handle already lost, rejects at once without the store, and gives its keys back', async () => {
      const { handle, leases } = setUp(['a', 'b']);
      await jest.advanceTimersByTimeAsync(TTL_MS);
      expect(handle.lost).toBe(true);
      leases.releaseReply = never;
      leases.giveBackReply = never;
      const releasing = handle.release();
      await expect(stateOf(releasing)).resolves.toBe('rejected');
      await expect(releasing).rejects.toBe(handle.lostReason);
      expect(leases.log).toEqual(['abort', 'giveBack a', 'giveBack b']);
    });

    it('is shared by concurrent calls', async () => {
      const { handle, leases } = setUp(['a', 'b']);
      let answer!: () => void;
      const answered = new Promise<void>((resolve) => (answer = resolve));
      leases.releaseReply = async () => {
        await answered;
        return 'released';
      };
      const first = handle.release();
      const second = handle.release();
      await expect(stateOf(first)).resolves.toBe('pending');
      answer();
      await Promise.all([first, second]);
      expect(leases.log).toEqual(['release b', 'release a']);
    });
  });

  describe('revoke()', () => {
    it('aborts the signal before giving the keys back, and counts the released ones', async () => {
      const { handle, leases, emitted } = setUp(['a', 'b', 'c']);
      const outcomes: Record<string, ReleaseLeaseOutcome | undefined> = {
        a: 'released',
        b: 'lost',
        c: undefined,
      };
      leases.giveBackReply = async (held) => outcomes[held.key];
      await expect(handle.revoke('the service is shutting down')).resolves.toBe(1);
      expect(leases.log).toEqual(['abort', 'giveBack a', 'giveBack b', 'giveBack c']);
      expect(handle.signal.reason).toBeInstanceOf(LockLostError);
      expect((handle.signal.reason as LockLostError).message).toMatch(/shutting down/);
      expect(emitted).toHaveLength(1);
      expect(handle.released).toBe(true);
    });

    it("counts the keys a holder's own release gives back once it was told", async () => {
      const { handle, leases } = setUp(['a']);
      // The holder reacts to the abort at once, before revoke() resumes.
      handle.signal.addEventListener('abort', () => void handle.release().catch(() => undefined));
      await expect(handle.revoke('releaseAllHeld()')).resolves.toBe(1);
      expect(leases.log).toEqual(['abort', 'giveBack a']);
    });

    it('is 0 for a handle already released, and gives nothing back', async () => {
      const { handle, leases } = setUp(['a']);
      await handle.release();
      leases.log.length = 0;
      await expect(handle.revoke('shutdown')).resolves.toBe(0);
      expect(leases.log).toEqual([]);
      expect(handle.signal.aborted).toBe(false);
    });
  });

  describe('extend()', () => {
    it('rejects on a lost handle without renewing', async () => {
      const { handle, leases } = setUp(['a']);
      await jest.advanceTimersByTimeAsync(TTL_MS);
      await expect(handle.extend()).rejects.toBe(handle.lostReason);
      expect(handle.lostReason).toBeInstanceOf(LockLostError);
      expect(leases.log).toEqual(['abort']);
    });

    it('rejects on a released handle', async () => {
      const { handle } = setUp(['a']);
      await handle.release();
      await expect(handle.extend()).rejects.toBeInstanceOf(MongoLockError);
    });

    it('rejects when a release came while it waited for an earlier renewal', async () => {
      const { handle, leases } = setUp(['a']);
      let answer!: () => void;
      leases.renewReply = () =>
        new Promise((resolve) => {
          answer = () => resolve({ renewed: true, sentAt: performance.now(), remainingMs: TTL_MS });
        });
      const first = handle.extend();
      await jest.advanceTimersByTimeAsync(0);
      // Waits for the first one's reply; the release asked for meanwhile stops renewals.
      const second = expect(handle.extend()).rejects.toBeInstanceOf(MongoLockError);
      const releasing = handle.release();
      answer();
      await first;
      await second;
      await releasing;
      expect(leases.log).toEqual(['renew a', 'release a']);
    });

    it('renews again on a later call after one failed (MongoDB back)', async () => {
      const { handle, leases } = setUp(['a']);
      leases.renewReply = () => Promise.reject(new LockStoreUnavailableError('away'));
      await expect(handle.extend()).rejects.toBeInstanceOf(LockStoreUnavailableError);
      leases.renewReply = async () => ({
        renewed: true,
        sentAt: performance.now(),
        remainingMs: TTL_MS,
      });
      await handle.extend();
      expect(leases.log).toEqual(['renew a', 'renew a']);
    });

    it('rejects with LockLostError when the renewal is refused', async () => {
      const { handle, leases } = setUp(['a']);
      leases.renewReply = async () => ({ renewed: false, sentAt: performance.now() });
      await expect(handle.extend()).rejects.toBeInstanceOf(LockLostError);
      expect(handle.signal.aborted).toBe(true);
    });
  });

  it('expiresAt follows the lease end', async () => {
    const { handle, leases } = setUp(['a']);
    const expiresInMs = () => handle.expiresAt.getTime() - Date.now();
    expect(expiresInMs()).toBeCloseTo(TTL_MS, 0);
    await jest.advanceTimersByTimeAsync(4_000);
    expect(expiresInMs()).toBeCloseTo(TTL_MS - 4_000, 0);
    leases.renewReply = async () => ({
      renewed: true,
      sentAt: performance.now(),
      remainingMs: 20_000,
    });
    await handle.extend(20_000);
    // The server's 20 s less the safety margin (5 % of 20 s).
    expect(expiresInMs()).toBeCloseTo(19_000, 0);
  });
});

describe('MongoLockHandle renewals (real timers)', () => {
  it('an extend() failing while a scheduled renewal waits for it leaves no unhandled rejection', async () => {
    // A 1 s lease whose scheduled renewal comes at 500 ms.
    const { handle, leases } = setUp(['a'], 1_000, true);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      let fail!: (error: Error) => void;
      leases.renewReply = () => new Promise((_resolve, reject) => (fail = reject));
      const extended = handle.extend();
      // The scheduled renewal's turn (at 500 ms) comes while the extend() is in flight.
      await new Promise((resolve) => setTimeout(resolve, 650));
      leases.renewReply = new FakeLeases().renewReply;
      fail(new LockStoreUnavailableError('away'));
      await expect(extended).rejects.toBeInstanceOf(LockStoreUnavailableError);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await handle.release().catch(() => undefined);
    }
  });
});
