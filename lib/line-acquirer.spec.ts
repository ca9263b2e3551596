import { LockNotAcquiredError, LockStoreUnavailableError } from './errors';
import { LineAcquirer } from './line-acquirer';
import { LineHandover } from './line-handover';
import type { LineAcquireRequest } from './line-attempt';
import type { JoinResult, LeaveResult } from './store/line/line-commands';
import type { LineStorage } from './store/line/line-store';
import { LineWaiters } from './waiting/line-waiters';

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
    const waiters = new LineWaiters();
    const acquirer = new LineAcquirer({
      store,
      waiters,
      handover: new LineHandover(true),
      holderId: 'me',
    });
    return { acquirer, left };
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
      leaderId: 'me',
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
