import { LineLeaves } from './line-leaves';
import type { LeaveResult } from './store/line/line-commands';
import type { LineStorage } from './store/line/line-store';
import { LineWaiters } from './waiting/line-waiters';

/**
 * Which of our leaves `hurry` sends at once, on a storage whose leaves the test answers (the
 * MongoDB store's commands are tested over the wire in `test/`).
 */
describe('LineLeaves.hurry: our entries leaving in the background', () => {
  it("sends their key's leaves now, while they are retried, and nothing once they ended", async () => {
    const sent: string[] = [];
    let answer: () => Promise<LeaveResult> = () => Promise.reject(new Error('no reply'));
    const store = {
      leave: (key: string, token: string) => {
        sent.push(`${key} ${token}`);
        return answer();
      },
    } as unknown as LineStorage;
    const leaves = new LineLeaves(store, new LineWaiters());
    expect(leaves.hurry('k')).toBeUndefined();
    void leaves.inBackground('k', 'a', performance.now() + 5_000, 'joined');
    void leaves.inBackground('k', 'b', performance.now() + 5_000, 'joined');
    void leaves.inBackground('other', 'c', performance.now() + 5_000, 'joined');
    await new Promise((resolve) => setImmediate(resolve));
    sent.splice(0);

    await leaves.hurry('k');

    expect(sent.sort()).toEqual(['k a', 'k b']);
    answer = () => Promise.resolve({ left: true, holders: [] });
    await leaves.settled();
    expect(leaves.hurry('k')).toBeUndefined();
    expect(leaves.hurry('other')).toBeUndefined();
  });

  it('shares the leave on its way with its retries, and one that found the entry answers for them', async () => {
    const answers: Array<(result: LeaveResult) => void> = [];
    const store = {
      leave: () => new Promise<LeaveResult>((resolve) => answers.push(resolve)),
    } as unknown as LineStorage;
    const leaves = new LineLeaves(store, new LineWaiters());
    const leaving = leaves.inBackground('k', 'a', performance.now() + 5_000, 'joined');
    await new Promise((resolve) => setImmediate(resolve));

    const hurried = leaves.hurry('k');
    await new Promise((resolve) => setImmediate(resolve));
    expect(answers).toHaveLength(1);
    answers[0]({ left: true, holders: [] });

    await hurried;
    expect(await leaving).toBe(true);
    expect(answers).toHaveLength(1);
  });

  it('names no entry whose join went unanswered: it may not be there', async () => {
    const store = { leave: () => Promise.reject(new Error('no reply')) } as unknown as LineStorage;
    const leaves = new LineLeaves(store, new LineWaiters());
    void leaves.inBackground('k', 'a', performance.now() + 100, 'unknown');

    expect(leaves.hurry('k')).toBeUndefined();
    await leaves.settled();
  });

  it('settles on a leave it sent while the retry waits, though that wait would end past the lease', async () => {
    let failing = true;
    const store = {
      leave: (): Promise<LeaveResult> =>
        failing
          ? Promise.reject(new Error('no reply'))
          : Promise.resolve({ left: true, holders: [] }),
    } as unknown as LineStorage;
    const leaves = new LineLeaves(store, new LineWaiters());
    // Sends at about 0, 50, 150, 350 and 750 ms fail; the next would be past the lease (1 s).
    const leaving = leaves.inBackground('k', 'a', performance.now() + 1_000, 'joined');
    await sleep(800);
    failing = false;
    const hurriedAt = performance.now();

    await leaves.hurry('k');

    expect(await leaving).toBe(true);
    expect(performance.now() - hurriedAt).toBeLessThan(500);
  });

  it('takes a leave that found the entry gone as final: no leave of it is sent again', async () => {
    let failing = true;
    let sent = 0;
    const store = {
      leave: (): Promise<LeaveResult> => {
        sent += 1;
        return failing
          ? Promise.reject(new Error('no reply'))
          : Promise.resolve({ left: false, holders: [] });
      },
    } as unknown as LineStorage;
    const leaves = new LineLeaves(store, new LineWaiters());
    const leaving = leaves.inBackground('k', 'a', performance.now() + 10_000, 'joined');
    await sleep(400); // the retry now waits 400 ms
    failing = false;
    const before = sent;

    await leaves.hurry('k');
    await leaves.hurry('k');

    expect(await leaving).toBe(false);
    expect(sent - before).toBe(1);
  });

  it('waits at its lease end for a leave it sent before then, and counts its answer', async () => {
    let sent = 0;
    const store = {
      leave: (): Promise<LeaveResult> =>
        sent++ < 2
          ? Promise.reject(new Error('no reply'))
          : // Lands before the lease end; its reply comes after.
            new Promise((resolve) => setTimeout(() => resolve({ left: true, holders: [] }), 200)),
    } as unknown as LineStorage;
    const leaves = new LineLeaves(store, new LineWaiters());
    // Sends at 0 and 50 ms fail; the retry then waits until 150 ms, past the lease end (100).
    const leaving = leaves.inBackground('k', 'a', performance.now() + 100, 'joined');
    await sleep(70);

    const hurried = leaves.hurry('k');

    expect(await leaving).toBe(true);
    expect(await hurried).toEqual([true]);
  });

  it('hurries no entry past its lease end: it is gone by time alone', async () => {
    let sent = 0;
    const store = {
      leave: (): Promise<LeaveResult> => {
        sent += 1;
        return Promise.reject(new Error('no reply'));
      },
    } as unknown as LineStorage;
    const leaves = new LineLeaves(store, new LineWaiters());
    // Sends at 0, 50 and 150 ms fail; the retry then waits until 350 ms, past the lease (250).
    const leaving = leaves.inBackground('k', 'a', performance.now() + 250, 'joined');
    await sleep(300);
    const before = sent;

    await leaves.hurry('k');

    expect(sent).toBe(before);
    expect(await leaving).toBeUndefined();
  });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
