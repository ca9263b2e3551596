import { LineLeaves } from './line-leaves';
import type { LeaveResult } from './store/line/line-commands';
import type { LineStorage } from './store/line/line-store';
import { LineWaiters } from './waiting/line-waiters';

/**
 * Which of our entries a join may drop (`leavingOn`), on a storage whose leaves the test answers
 * (the MongoDB store's commands are tested over the wire in `test/store`).
 */
describe('LineLeaves: our entries leaving in the background', () => {
  function leavesOver(answer: () => Promise<LeaveResult>) {
    const store = { leave: answer } as unknown as LineStorage;
    return new LineLeaves(store, new LineWaiters());
  }
  const unanswered = () => Promise.reject(new Error('no reply'));

  it('names their tokens on their key while their leaves are retried, and not after', async () => {
    let answer: () => Promise<LeaveResult> = unanswered;
    const leaves = leavesOver(() => answer());
    const leaving = leaves.inBackground('k', 'a', performance.now() + 5_000, 'joined');
    void leaves.inBackground('k', 'b', performance.now() + 5_000, 'joined');

    expect(leaves.leavingOn('k')).toEqual(['a', 'b']);
    expect(leaves.leavingOn('other')).toBeUndefined();
    answer = () => Promise.resolve({ left: false, holders: [] });
    await leaving;
    await leaves.settled();
    expect(leaves.leavingOn('k')).toBeUndefined();
  });

  it('names none while an operator command holds the key back', async () => {
    let answer: () => Promise<LeaveResult> = unanswered;
    const leaves = leavesOver(() => answer());
    void leaves.inBackground('k', 'a', performance.now() + 5_000, 'joined');
    const done = leaves.holdBack('k');

    expect(leaves.leavingOn('k')).toBeUndefined();
    done();
    await new Promise((resolve) => setImmediate(resolve));
    expect(leaves.leavingOn('k')).toEqual(['a']);
    answer = () => Promise.resolve({ left: true, holders: [] });
    await leaves.settled();
  });
});
