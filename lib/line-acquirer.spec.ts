import { LockNotAcquiredError, LockStoreUnavailableError } from './errors';
import { LineAcquirer } from './line-acquirer';
import { LineHandover } from './line-handover';
import type { LineAcquireRequest } from './line-attempt';
import type { JoinResult, LeaveResult } from './store/line/line-commands';
import type { LineStorage } from './store/line/line-store';
import { LineWaiters } from './waiting/line-waiters';

/** An acquirer of holder `me` over `store`, whose replies the test decides. */
function acquirerOver(store: LineStorage): LineAcquirer {
  return new LineAcquirer({
    store,
    waiters: new LineWaiters(),
    handover: new LineHandover(true),
    holderId: 'me',
  });
}

/**
 * The acquirer's bookkeeping of its entry, on a storage whose replies the test decides (the
 * MongoDB store's commands are tested over the wire in `test/store`).
 */
describe('LineAcquirer: an entry of unknown outcome', () => {
  const request: LineAcquireRequest = {
    key: 'k',
    kind: { mode: 'exclusive' },
    ttlMs: 500,
    timeoutMs: 5_000,
  };
  const full: JoinResult = {
    joined: false,
    reason: 'full',
    holderId: 'other',
    retryAfterMs: 1_000,
    inUse: { exclusiveLive: true, permits: null },
  };

  function acquirerOn(joins: (() => Promise<JoinResult>)[]) {
    const left: string[] = [];
    const store = {
      join: () => (joins.shift() as () => Promise<JoinResult>)(),
      leave: (_key: string, token: string): Promise<LeaveResult> => {
        left.push(token);
        return Promise.resolve({ left: false, holders: [] });
      },
    } as unknown as LineStorage;
    return { acquirer: acquirerOver(store), left };
  }

  it('a join refused after an unanswered one is left in the background: the first may land', async () => {
    const { acquirer, left } = acquirerOn([
      () => Promise.reject(new LockStoreUnavailableError('no reply in time')),
      () => Promise.resolve(full),
    ]);
    await expect(acquirer.acquire(request)).rejects.toBeInstanceOf(LockNotAcquiredError);
    // The first join may yet land and make an entry nobody owns: it is left by token.
    await acquirer.leavesSettled();
    expect(left.length).toBeGreaterThan(0);
  });

  it("a lease counts from the first join that may have landed: a retry's reply may give that one's time", async () => {
    let firstSentAt = 0;
    const holds: JoinResult = {
      joined: true,
      holds: true,
      fence: 16n,
      // A stored image (no server time) times our entry by its lease end less ttlMs: the whole
      // lease, as the first join, which landed, set it.
      remainingMs: request.ttlMs,
      ahead: 0,
      aheadEndsInMs: 0,
      holdsInMs: 0,
      blockerId: 'me',
    };
    const { acquirer } = acquirerOn([
      // Unanswered within 300 ms; the retry, sent after that, is answered at once.
      () => {
        firstSentAt = performance.now();
        return new Promise((_, reject) =>
          setTimeout(() => reject(new LockStoreUnavailableError('no reply in time')), 300),
        );
      },
      () => Promise.resolve(holds),
    ]);
    const hold = await acquirer.acquire(request);
    expect(hold.leaseEnd).toBeLessThanOrEqual(firstSentAt + request.ttlMs);
  });

  it('a join refused with nothing sent before it leaves nothing', async () => {
    const { acquirer, left } = acquirerOn([() => Promise.resolve(full)]);
    await expect(acquirer.acquire(request)).rejects.toBeInstanceOf(LockNotAcquiredError);
    await acquirer.leavesSettled();
    expect(left).toEqual([]);
  });
});

describe('LineAcquirer: a give-back', () => {
  /** An acquirer whose leaves fail (no reply) for `failingMs`, then are answered. */
  function acquirerWhoseLeavesFailFor(failingMs: number) {
    const failUntil = performance.now() + failingMs;
    const store = {
      leave: (): Promise<LeaveResult> =>
        performance.now() < failUntil
          ? Promise.reject(new LockStoreUnavailableError('no reply in time'))
          : Promise.resolve({ left: true, holders: [] }),
    } as unknown as LineStorage;
    return acquirerOver(store);
  }

  it.each([
    ["the handle's lease as extended", { hold: 100, lease: 1_000 }],
    [
      'its own lease, a key of several that ends after the handle shortest',
      { hold: 1_000, lease: 100 },
    ],
  ])('is retried while %s may run', async (_what, ms) => {
    const acquirer = acquirerWhoseLeavesFailFor(400);
    const now = performance.now();
    const hold = { key: 'k', token: 't', fence: 16n, leaseEnd: now + ms.hold, ttlMs: ms.hold };
    const lease = { end: now + ms.lease, ttlMs: ms.lease };
    // Given up at the shorter lease (300 ms before MongoDB answers), it would settle undefined.
    await expect(acquirer.giveBack(hold, lease)).resolves.toBe(true);
  });
});

describe('LineAcquirer: queued', () => {
  // A lease long enough that the wait sends nothing more while the test looks.
  const request: LineAcquireRequest = {
    key: 'k',
    kind: { mode: 'exclusive' },
    ttlMs: 30_000,
    timeoutMs: 60_000,
  };
  const placed = (holds: boolean): JoinResult => ({
    joined: true,
    holds,
    fence: 16n,
    remainingMs: request.ttlMs,
    ahead: holds ? 0 : 1,
    aheadEndsInMs: holds ? 0 : 20_000,
    holdsInMs: holds ? 0 : 20_000,
    blockerId: holds ? 'me' : 'other',
  });
  function acquirerJoining(result: JoinResult) {
    const store = {
      join: () => Promise.resolve(result),
      leave: (): Promise<LeaveResult> => Promise.resolve({ left: true, holders: [] }),
    } as unknown as LineStorage;
    return acquirerOver(store);
  }

  it("is told once when the join's reply leaves the call waiting in line", async () => {
    const acquirer = acquirerJoining(placed(false));
    const abort = new AbortController();
    let told = 0;
    let queued!: () => void;
    const inLine = new Promise<void>((resolve) => (queued = resolve));
    const acquiring = acquirer
      .acquire({ ...request, signal: abort.signal, queued: () => (told++, queued()) })
      .catch((error: unknown) => error);
    await inLine;
    abort.abort(new Error('gave up'));
    await acquiring;
    await acquirer.leavesSettled();
    expect(told).toBe(1);
  });

  it("is not told when the join's reply says the call holds", async () => {
    let told = 0;
    const hold = await acquirerJoining(placed(true)).acquire({ ...request, queued: () => told++ });
    expect(hold.fence).toBe(16n);
    expect(told).toBe(0);
  });
});

describe('LineAcquirer: our entries on their way out', () => {
  it("a wait's join goes alongside the leave of our entry that a call here dissolved, not after it", async () => {
    const joinsAt: number[] = [];
    const place = (holds: boolean): JoinResult => ({
      joined: true,
      holds,
      fence: 16n,
      remainingMs: 30_000,
      ahead: holds ? 0 : 1,
      aheadEndsInMs: holds ? 0 : 5,
      holdsInMs: holds ? 0 : 5,
      blockerId: holds ? 'me' : 'other',
    });
    const store = {
      // The second caller waits (so its entry is kept for a third); the others hold at once.
      join: () => Promise.resolve(place(joinsAt.push(performance.now()) !== 2)),
      renew: () => Promise.resolve({ renewed: true, ...place(true) }),
      leave: (): Promise<LeaveResult> =>
        new Promise((resolve) => setTimeout(() => resolve({ left: true, holders: [] }), 300)),
    } as unknown as LineStorage;
    const acquirer = new LineAcquirer({
      store,
      waiters: new LineWaiters(),
      handover: new LineHandover(true),
      holderId: 'me',
      lateReplyMs: 1_000,
    });
    const request: LineAcquireRequest = {
      key: 'k',
      kind: { mode: 'exclusive' },
      ttlMs: 30_000,
      timeoutMs: 60_000,
    };
    const lease = () => ({ end: performance.now() + 30_000, ttlMs: 30_000 });
    await acquirer.release(await acquirer.acquire(request), lease());
    const second = await acquirer.acquire(request);
    expect(await acquirer.release(second, lease())).toBe(true); // kept for a next caller
    const calledAt = performance.now();

    // Its lease does not fit the kept entry's: the entry is given back, and this caller joins.
    await acquirer.acquire({ ...request, ttlMs: 60_000 });

    expect(joinsAt.at(-1)! - calledAt).toBeLessThan(150);
    await acquirer.leavesSettled();
  });
});
