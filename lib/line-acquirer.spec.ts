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

  it('a join refused with nothing sent before it leaves nothing', async () => {
    const { acquirer, left } = acquirerOn([() => Promise.resolve(full)]);
    await expect(acquirer.acquire(request)).rejects.toBeInstanceOf(LockNotAcquiredError);
    await acquirer.leavesSettled();
    expect(left).toEqual([]);
  });
});
