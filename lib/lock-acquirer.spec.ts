import { GRANT_LEASE_MS } from './store/direct-grant';
import { EXCLUSIVE } from './store/lock-modes';
import { LockNotAcquiredError, LockStoreUnavailableError } from './errors';
import { HeldLocks } from './held-locks';
import { LockAcquirer } from './lock-acquirer';
import type { ResolvedAcquireOptions } from './options';
import type { AcquireAttemptOutcome, AcquireAttemptWon } from './store/acquire-attempt';
import type { LockStore } from './store/lock-store';
import type { ReleaseResult } from './store/release-lease';
import type { RenewLeaseOutcome } from './store/renew-lease';
import { LockChangeFeed } from './waiting/change-feed';
import { LockWaiting } from './waiting/lock-waiting';
import { nextTurn } from './util/timers';

interface KeyAndOwner {
  key: string;
  owner: string;
}

/** A fence of its own for each key, so that a release can be checked to carry its key's. */
const fenceOf = (key: string) => BigInt(key.charCodeAt(0));

const won = (key: string, owner: string): AcquireAttemptOutcome => ({
  key,
  won: true,
  owner,
  fence: fenceOf(key),
  sentAt: performance.now(),
  remainingMs: 10_000,
  holderId: 'me',
  operationTime: undefined,
});

const heldByOther = (key: string): AcquireAttemptOutcome => ({
  key,
  won: false,
  sentAt: performance.now(),
  remainingMs: 42_000,
  holderId: 'other',
  operationTime: undefined,
});

const unavailable = () => new LockStoreUnavailableError('MongoDB is unavailable (acquire)');

/**
 * The four store operations the acquirer uses, recorded. Every key is free unless a test
 * says otherwise through `onAttempt` (`tries`: earlier attempts on that key).
 */
class FakeStore {
  readonly handsOverInLease = true;
  readonly attempts: KeyAndOwner[] = [];
  readonly releases: (KeyAndOwner & { fence?: bigint })[] = [];
  readonly giveBacks: (KeyAndOwner & { fence?: bigint })[] = [];
  onAttempt: (key: string, owner: string, tries: number) => Promise<AcquireAttemptOutcome> = async (
    key,
    owner,
  ) => won(key, owner);

  attempt = (key: string, owner: string): Promise<AcquireAttemptOutcome> => {
    const tries = this.attempts.filter((attempt) => attempt.key === key).length;
    this.attempts.push({ key, owner });
    return this.onAttempt(key, owner, tries);
  };

  readonly renewals: string[] = [];
  onRenew: (ttlMs: number) => Promise<RenewLeaseOutcome> = async (ttlMs) => ({
    renewed: true,
    sentAt: performance.now(),
    remainingMs: ttlMs,
  });

  renew = (key: string, _owner: string, ttlMs: number): Promise<RenewLeaseOutcome> => {
    this.renewals.push(key);
    return this.onRenew(ttlMs);
  };

  /** Releases that reject (their outcome unknown) before the next ones answer. */
  failingReleases = 0;

  release = async (
    key: string,
    owner: string,
    { fence }: { fence?: bigint } = {},
  ): Promise<ReleaseResult> => {
    this.releases.push({ key, owner, fence });
    if (this.failingReleases > 0) {
      this.failingReleases -= 1;
      throw unavailable();
    }
    return { outcome: 'released' };
  };

  /** Reservations withdrawn by waiting queues (the fake store never makes one). */
  readonly withdrawn: string[] = [];
  withdraw = (key: string): void => {
    this.withdrawn.push(key);
  };

  /** What each give-back answers: where the lock went. */
  giveBackResult: ReleaseResult = { outcome: 'released' };

  giveBack = async (
    key: string,
    owner: string,
    fence?: bigint,
  ): Promise<ReleaseResult | undefined> => {
    this.giveBacks.push(fence === undefined ? { key, owner } : { key, owner, fence });
    return this.giveBackResult;
  };

  /** The owner tokens the store has seen in attempts. */
  get owners(): string[] {
    return [...new Set(this.attempts.map((attempt) => attempt.owner))];
  }
}

const defaults: ResolvedAcquireOptions = {
  ttlMs: 10_000,
  timeoutMs: 1_000,
  signal: undefined,
  renew: false,
  metricsLabel: '(direct)',
  renewalIntervalRatio: 0.5,
  scope: undefined,
  mode: EXCLUSIVE,
};

function setUp() {
  const feed = new LockChangeFeed(
    () => {
      throw new Error('no streams in this test');
    },
    { warn: () => undefined, error: () => undefined },
    'off',
  );
  feed.watchEvents(() => undefined)(); // announce polling once, quietly
  const waiting = new LockWaiting(feed, 'me', {
    safetyPollIntervalMs: 600_000,
    pollIntervalMs: 10,
    maxPollIntervalMs: 20,
  });
  const held = new HeldLocks();
  const acquirer = new LockAcquirer({
    waiting,
    maxHoldMs: 3_600_000,
    held,
    operationTimeoutMs: 1_000,
    holderId: 'me',
    localTransfers: true,
  });
  const store = new FakeStore();
  const acquire = (
    keys: string[],
    options: Partial<ResolvedAcquireOptions> = {},
    signal = new AbortController().signal,
  ) => acquirer.acquire(store as unknown as LockStore, keys, { ...defaults, ...options }, signal);
  return { store, held, acquire, waiting };
}

/** Runs fake time for `ms`; the call must have settled by then. */
async function after<T>(ms: number, promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  let result: { value?: T; error?: unknown } | undefined;
  promise.then(
    (value) => (result = { value }),
    (error: unknown) => (result = { error }),
  );
  await jest.advanceTimersByTimeAsync(ms);
  if (!result) throw new Error(`still pending after ${ms} ms`);
  return result;
}

/** A reply the test sends when it wants to. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

const byKey = (entries: KeyAndOwner[]) => [...entries].sort((x, y) => x.key.localeCompare(y.key));

describe('LockAcquirer', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  describe('owner token', () => {
    it("is one token for every key of a call, used for its release too (with each key's fence), and new for each call", async () => {
      const { store, acquire } = setUp();
      const { value: handle } = await after(0, acquire(['a', 'b', 'c']));
      expect(store.attempts.map((attempt) => attempt.key)).toEqual(['a', 'b', 'c']);
      expect(store.owners).toHaveLength(1);
      const [token] = store.owners;
      await handle!.release();
      expect(store.releases).toEqual([
        { key: 'c', owner: token, fence: fenceOf('c') },
        { key: 'b', owner: token, fence: fenceOf('b') },
        { key: 'a', owner: token, fence: fenceOf('a') },
      ]);
      await after(0, acquire(['a']));
      expect(store.owners).toHaveLength(2);
    });

    it("is given back with each key's fence when the handle is revoked", async () => {
      const { store, acquire } = setUp();
      const { value: handle } = await after(0, acquire(['a', 'b']));
      const [token] = store.owners;
      await handle!.revoke('released by the application');
      expect(store.giveBacks).toEqual([
        { key: 'a', owner: token, fence: fenceOf('a') },
        { key: 'b', owner: token, fence: fenceOf('b') },
      ]);
    });

    it('tells local waiters where a give-back sent the lock: granted here, with its fence bound', async () => {
      const { store, acquire, waiting } = setUp();
      const told = jest.spyOn(waiting, 'notifyHoldEnded');
      const { value: handle } = await after(0, acquire(['a', 'b']));
      store.giveBackResult = { outcome: 'released', grantedTo: 'me', grantFence: 40n };
      await handle!.revoke('released by the application');
      expect(told.mock.calls).toEqual([
        ['a', 'granted-here', 40n],
        ['b', 'granted-here', 40n],
      ]);
      told.mockClear();
      const { value: other } = await after(0, acquire(['c']));
      store.giveBackResult = { outcome: 'released', grantedTo: 'elsewhere', grantFence: 41n };
      await other!.revoke('released by the application');
      expect(told.mock.calls).toEqual([['c', 'granted-elsewhere', 41n]]);
    });

    it('is kept by a retry after an attempt that got no reply', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async (key, owner, tries) => {
        if (key === 'b' && tries < 2) throw unavailable();
        return won(key, owner);
      };
      const { value: handle } = await after(100, acquire(['a', 'b']));
      expect(handle).toBeDefined();
      expect(store.attempts.map((attempt) => attempt.key)).toEqual(['a', 'b', 'b', 'b']);
      expect(store.owners).toHaveLength(1);
      expect(store.giveBacks).toEqual([]);
    });
  });

  describe('a failed call gives back', () => {
    it('on timeout: the keys won (with their fence) and the keys whose attempt threw, by its token', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async (key, owner, tries) => {
        if (key === 'a') return won(key, owner);
        if (tries === 0) throw unavailable();
        return heldByOther(key);
      };
      const { error } = await after(200, acquire(['a', 'b'], { timeoutMs: 200 }));
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(error).toMatchObject({ keys: ['a', 'b'], holderId: 'other' });
      const [token] = store.owners;
      expect(byKey(store.giveBacks)).toEqual([
        { key: 'a', owner: token, fence: fenceOf('a') },
        { key: 'b', owner: token },
      ]);
    });

    it('on abort: the keys won', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async (key, owner) => (key === 'a' ? won(key, owner) : heldByOther(key));
      const controller = new AbortController();
      const acquiring = acquire(['a', 'b'], {}, controller.signal);
      await jest.advanceTimersByTimeAsync(50);
      expect(store.giveBacks).toEqual([]);
      const reason = new Error('caller left');
      controller.abort(reason);
      const { error } = await after(0, acquiring);
      expect(error).toBe(reason);
      expect(store.giveBacks).toEqual([{ key: 'a', owner: store.owners[0], fence: fenceOf('a') }]);
    });

    it('when MongoDB is unavailable: the keys won and the key whose attempt threw', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async (key, owner) => {
        if (key === 'b') throw unavailable();
        return won(key, owner);
      };
      const { error } = await after(0, acquire(['a', 'b'], { timeoutMs: 0 }));
      expect(error).toBeInstanceOf(LockStoreUnavailableError);
      const [token] = store.owners;
      expect(byKey(store.giveBacks)).toEqual([
        { key: 'a', owner: token, fence: fenceOf('a') },
        { key: 'b', owner: token },
      ]);
    });

    it('an attempt that rejects after the call ended', async () => {
      const { store, acquire } = setUp();
      const reply = deferred<AcquireAttemptOutcome>();
      store.onAttempt = () => reply.promise;
      const controller = new AbortController();
      const acquiring = acquire(['a'], {}, controller.signal);
      await jest.advanceTimersByTimeAsync(10);
      controller.abort(new Error('caller left'));
      await expect(after(0, acquiring)).resolves.toMatchObject({
        error: { message: 'caller left' },
      });
      expect(store.giveBacks).toEqual([]);
      reply.reject(unavailable());
      await jest.advanceTimersByTimeAsync(0);
      expect(store.giveBacks).toEqual([{ key: 'a', owner: store.owners[0] }]);
    });

    it('a win that arrives after the waiter left', async () => {
      const { store, held, acquire } = setUp();
      const reply = deferred<AcquireAttemptOutcome>();
      store.onAttempt = () => reply.promise;
      const controller = new AbortController();
      const acquiring = acquire(['a'], {}, controller.signal);
      await jest.advanceTimersByTimeAsync(10);
      controller.abort(new Error('caller left'));
      await after(0, acquiring);
      expect(store.giveBacks).toEqual([]);
      reply.resolve(won('a', store.owners[0]));
      await jest.advanceTimersByTimeAsync(0);
      expect(store.giveBacks).toEqual([{ key: 'a', owner: store.owners[0], fence: fenceOf('a') }]);
      expect(held.size).toBe(0);
    });
  });

  it('keeps a handed-out handle in HeldLocks until it is released', async () => {
    const { store, held, acquire } = setUp();
    const { value: handle } = await after(0, acquire(['a', 'b']));
    expect(held.size).toBe(1);
    await handle!.release();
    await jest.advanceTimersByTimeAsync(0);
    expect(held.size).toBe(0);
    expect(store.giveBacks).toEqual([]);
  });

  describe('a release with a caller waiting here', () => {
    /** `first` holds `k`; a second call of `options` waits for it until the test releases. */
    async function secondWaiting(
      options: Partial<ResolvedAcquireOptions> = {},
      firstOptions: Partial<ResolvedAcquireOptions> = {},
      firstWon: Partial<AcquireAttemptWon> = {},
    ) {
      const setup = setUp();
      const { store, acquire } = setup;
      store.onAttempt = async (key, owner, tries) =>
        tries === 0 ? { ...(won(key, owner) as AcquireAttemptWon), ...firstWon } : heldByOther(key);
      const { value: first } = await after(0, acquire(['k'], firstOptions));
      const second = acquire(['k'], { timeoutMs: 5_000, ...options });
      await jest.advanceTimersByTimeAsync(20);
      return { ...setup, first: first!, second };
    }

    /** {@link secondWaiting}, the first lease renewed (a 10 s lease, renewed at 5 s). */
    const secondWaitingWhileRenewing = () =>
      secondWaiting({ ttlMs: 4_000, timeoutMs: 20_000 }, { renew: true });

    it('hands the key over within the lease, without a command: the next fence, same token and deadline', async () => {
      const { store, first, second } = await secondWaiting({ ttlMs: 8_000 });
      const [token] = store.owners;
      await first.release();
      const { value: handle } = await after(0, second);
      expect(store.releases).toEqual([]);
      expect(handle!.fence).toBe(fenceOf('k') + 1n);
      expect(handle!.expiresAt).toEqual(first.expiresAt);
      await handle!.release();
      expect(store.releases).toEqual([{ key: 'k', owner: token, fence: fenceOf('k') + 1n }]);
    });

    it('releases by a write when no fence of the lease is left to hand on', async () => {
      const last = { fenceBlockEnd: fenceOf('k') };
      const { store, first, second } = await secondWaiting({}, {}, last);
      await first.release();
      expect(store.releases).toEqual([{ key: 'k', owner: store.owners[0], fence: fenceOf('k') }]);
      await jest.advanceTimersByTimeAsync(20);
      void second.catch(() => undefined);
    });

    it("releases by a write when less than half the next caller's ttlMs is left", async () => {
      const { store, first, second } = await secondWaiting({ ttlMs: 8_000, timeoutMs: 20_000 });
      await jest.advanceTimersByTimeAsync(6_000); // 3.5 s of the first lease left
      await first.release();
      expect(store.releases).toHaveLength(1);
      void second.catch(() => undefined);
    });

    it('releases by a write to a caller asking for a longer lease than ours', async () => {
      const { store, first, second } = await secondWaiting({ ttlMs: 10_001 });
      await first.release();
      expect(store.releases).toHaveLength(1);
      void second.catch(() => undefined);
    });

    it('releases a scoped lock by a write, even to a caller of the same scope', async () => {
      const { store, first, second } = await secondWaiting({ scope: 'a' }, { scope: 'a' });
      await first.release();
      expect(store.releases).toHaveLength(1);
      void second.catch(() => undefined);
    });

    it('releases a scoped lock by a write, also to an unscoped caller', async () => {
      const { store, first, second } = await secondWaiting({}, { scope: 'a' });
      await first.release();
      expect(store.releases).toHaveLength(1);
      void second.catch(() => undefined);
    });

    it('releases by a write to a scoped caller', async () => {
      const { store, first, second } = await secondWaiting({ scope: 'b' });
      await first.release();
      expect(store.releases).toHaveLength(1);
      void second.catch(() => undefined);
    });

    it('retries a release whose outcome was unknown by a write, never handing the key over', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async (key, owner, tries) =>
        tries === 0 ? won(key, owner) : heldByOther(key);
      const { value: first } = await after(0, acquire(['k']));
      store.failingReleases = 1;
      await expect(first!.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);
      // The release may have been applied: a caller here waits now, and the retry comes.
      const second = acquire(['k'], { timeoutMs: 5_000 });
      await jest.advanceTimersByTimeAsync(20);
      await first!.release();
      expect(store.releases).toHaveLength(2);
      void second.catch(() => undefined);
    });

    it('a call that fails after a key was handed over gives back what both tokens may hold there', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async (key, owner, tries) => {
        if (key === 'k' && tries === 0) return won(key, owner);
        if (key === 'k' && tries === 1) throw unavailable(); // the second call's first try
        return heldByOther(key);
      };
      const { value: first } = await after(0, acquire(['k']));
      const second = acquire(['k', 'z'], { timeoutMs: 300 });
      await jest.advanceTimersByTimeAsync(50);
      await first!.release(); // handed over: the second call holds `k` by the first's token
      const { error } = await after(300, second);
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      const [firstToken, secondToken] = store.owners;
      expect(store.giveBacks).toEqual(
        expect.arrayContaining([
          { key: 'k', owner: firstToken, fence: fenceOf('k') + 1n },
          { key: 'k', owner: secondToken },
        ]),
      );
    });

    it('releases by a write after a transaction ran under the lock', async () => {
      const { store, first, second } = await secondWaiting();
      first.pauseRenewal()(); // what a locked transaction does around its commit
      await first.release();
      expect(store.releases).toHaveLength(1);
      void second.catch(() => undefined);
    });

    it('releases by a write after a renewal whose outcome was unknown', async () => {
      const { store, first, second } = await secondWaitingWhileRenewing();
      store.onRenew = async () => {
        throw unavailable();
      };
      await jest.advanceTimersByTimeAsync(5_000); // the first renewal fails, to be retried
      await first.release();
      expect(store.releases).toHaveLength(1);
      void second.catch(() => undefined);
    });

    it('does not hand on a lock found lost while the release waited for a renewal', async () => {
      const { store, first, second } = await secondWaitingWhileRenewing();
      const renewal = deferred<RenewLeaseOutcome>();
      store.onRenew = () => renewal.promise;
      await jest.advanceTimersByTimeAsync(5_000); // a renewal is on its way
      const releasing = first.release();
      renewal.resolve({ renewed: false, sentAt: performance.now() });
      await after(0, releasing);
      expect(first.lost).toBe(true);
      expect(store.releases).toHaveLength(1);
      void second.catch(() => undefined);
    });
  });

  describe('a grant handed out without a write (its lease the short grant lease)', () => {
    /** A win as a grant handed out on its change event, its last attempt sent `ageMs` ago. */
    const handedOut = (key: string, ageMs: number): AcquireAttemptOutcome => ({
      key,
      won: true,
      owner: `grant:r1:${fenceOf(key)}`,
      fence: fenceOf(key),
      sentAt: performance.now() - ageMs,
      remainingMs: GRANT_LEASE_MS,
      holderId: 'me',
      operationTime: undefined,
      grantUnconfirmed: true,
    });

    it('as the last key, is left to the handle, which renews it at once (the caller does not renew)', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async (key, owner) =>
        key === 'b' ? handedOut(key, 1_000) : won(key, owner);
      const { value: handle } = await after(0, acquire(['a', 'b']));
      // On the event loop's next turn, after the caller's continuations.
      expect(store.renewals).toEqual([]);
      await nextTurn();
      // Less than half the 10 s lease is left, but more than a quarter of the grant lease.
      expect(store.renewals).toEqual(['a', 'b']);
      await jest.advanceTimersByTimeAsync(5_000);
      expect(store.renewals).toEqual(['a', 'b']);
      await handle!.release();
    });

    it('as the last key, is renewed before the hand-out when less than a quarter of the grant lease is left', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async (key, owner) =>
        key === 'b' ? handedOut(key, GRANT_LEASE_MS - 1_000) : won(key, owner);
      const acquiring = acquire(['a', 'b']);
      await jest.advanceTimersByTimeAsync(0);
      // Before the hand-out, which confirms it: the handle need not renew at once.
      expect(store.renewals).toEqual(['b']);
      const { value: handle } = await after(0, acquiring);
      await handle!.release();
    });

    it('before a later key, is confirmed at once, not left to lapse while that key is awaited', async () => {
      const { store, acquire } = setUp();
      const renewedBeforeB: number[] = [];
      store.onAttempt = async (key, owner) => {
        if (key === 'b') renewedBeforeB.push(store.renewals.length);
        return key === 'a' ? handedOut(key, 100) : won(key, owner);
      };
      const { value: handle } = await after(0, acquire(['a', 'b']));
      expect(renewedBeforeB).toEqual([1]);
      expect(store.renewals).toEqual(['a']);
      await handle!.release();
    });

    it('before a later key, a confirmation without a reply leaves it to the handle', async () => {
      const { store, acquire } = setUp();
      let failures = 1;
      store.onRenew = async (ttlMs) => {
        if (failures-- > 0) throw unavailable();
        return { renewed: true, sentAt: performance.now(), remainingMs: ttlMs };
      };
      store.onAttempt = async (key, owner) => (key === 'a' ? handedOut(key, 100) : won(key, owner));
      const { value: handle } = await after(0, acquire(['a', 'b']));
      await nextTurn();
      // The failed confirmation, then the handle's own first renewal of both keys.
      expect(store.renewals).toEqual(['a', 'a', 'b']);
      await handle!.release();
    });

    it('before a later key, lost before its confirmation: that key is awaited again', async () => {
      const { store, acquire } = setUp();
      let refusals = 1;
      store.onRenew = async (ttlMs) =>
        refusals-- > 0
          ? { renewed: false, sentAt: performance.now() }
          : { renewed: true, sentAt: performance.now(), remainingMs: ttlMs };
      store.onAttempt = async (key, owner, tries) =>
        key === 'a' && tries === 0 ? handedOut(key, 100) : won(key, owner);
      const { value: handle } = await after(0, acquire(['a', 'b']));
      expect(store.attempts.map((attempt) => attempt.key)).toEqual(['a', 'a', 'b']);
      expect(handle!.fences.get('a')).toBe(fenceOf('a'));
      await handle!.release();
    });
  });

  describe('with timeoutMs: 0', () => {
    it('rejects a held key with LockNotAcquiredError, its holder and lease, and gives nothing back', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async (key) => heldByOther(key);
      const { error } = await after(0, acquire(['a'], { timeoutMs: 0 }));
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(error).toMatchObject({ keys: ['a'], retryAfterMs: 42_000, holderId: 'other' });
      expect(store.attempts).toHaveLength(1);
      expect(store.giveBacks).toEqual([]);
    });

    it('rejects with LockStoreUnavailableError when MongoDB does not answer', async () => {
      const { store, acquire } = setUp();
      store.onAttempt = async () => {
        throw unavailable();
      };
      const { error } = await after(0, acquire(['a'], { timeoutMs: 0 }));
      expect(error).toBeInstanceOf(LockStoreUnavailableError);
      expect(store.attempts).toHaveLength(1);
      expect(store.giveBacks).toEqual([{ key: 'a', owner: store.owners[0] }]);
      // The attempt may still reach the server after that release: once more, later.
      await jest.advanceTimersByTimeAsync(1_000);
      expect(store.giveBacks).toEqual([
        { key: 'a', owner: store.owners[0] },
        { key: 'a', owner: store.owners[0] },
      ]);
    });
  });

  it('rejects a waiting call at its deadline with LockStoreUnavailableError while MongoDB does not answer', async () => {
    const { store, acquire } = setUp();
    store.onAttempt = async () => {
      throw unavailable();
    };
    const acquiring = acquire(['a'], { timeoutMs: 500 });
    await jest.advanceTimersByTimeAsync(490);
    expect(store.attempts.length).toBeGreaterThan(10);
    const { error } = await after(10, acquiring);
    expect(error).toBeInstanceOf(LockStoreUnavailableError);
    expect(error).not.toBeInstanceOf(LockNotAcquiredError);
    expect(store.owners).toHaveLength(1);
    expect(store.giveBacks).toEqual([{ key: 'a', owner: store.owners[0] }]);
  });
});
