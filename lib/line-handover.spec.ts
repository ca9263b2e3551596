import { setImmediate } from 'node:timers';
import { EntryFollowers, LineHandover } from './line-handover';
import type { LineHold } from './line-handover';

/** The policy of kept entries, without a store: when an entry is kept, taken and let go. */
describe('LineHandover: entries kept for a loop here', () => {
  const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
  const lease = () => ({ end: performance.now() + 30_000, ttlMs: 30_000 });

  /** An entry of ours on `key` that waited (or not) and now holds. */
  function holding(handover: LineHandover, key: string, waited: boolean): LineHold {
    const followers = handover.opened(key, !waited);
    handover.held(followers);
    return { key, token: 't', fence: 32n, leaseEnd: lease().end, ttlMs: 30_000, followers };
  }

  /** Marks `key` as looped: a caller asks within the turn of an answered leave. */
  function loop(handover: LineHandover, key: string): void {
    handover.left(key);
    handover.asks(key);
  }

  it('keeps a waited entry on a looped key until the next turn, then leaves it', async () => {
    const handover = new LineHandover(true);
    loop(handover, 'k');
    const leave = jest.fn(() => Promise.resolve());
    expect(handover.handOn(holding(handover, 'k', true), lease(), leave)).toBe(true);
    expect(leave).not.toHaveBeenCalled();
    await nextTurn();
    expect(leave).toHaveBeenCalledTimes(1);
    // Not taken: the key is no longer a loop, and the next release leaves at once.
    expect(handover.handOn(holding(handover, 'k', true), lease(), leave)).toBe(false);
  });

  it('forgets the loop at a release it does not keep: the next keeps nothing unless asked again', () => {
    const handover = new LineHandover(true);
    loop(handover, 'k');
    const leave = jest.fn(() => Promise.resolve());
    // Not kept: the entry did not wait (nobody else wants the key).
    expect(handover.handOn(holding(handover, 'k', false), lease(), leave)).toBe(false);
    expect(handover.handOn(holding(handover, 'k', true), lease(), leave)).toBe(false);
    loop(handover, 'k');
    expect(handover.handOn(holding(handover, 'k', true), lease(), leave)).toBe(true);
    handover.closeAll();
  });

  it('hands a kept entry to one caller only, with the next fence, and never leaves it', async () => {
    const handover = new LineHandover(true);
    loop(handover, 'k');
    const leave = jest.fn(() => Promise.resolve());
    handover.handOn(holding(handover, 'k', true), lease(), leave);
    expect(handover.takeKept('k', 30_000)?.fence).toBe(33n);
    expect(handover.takeKept('k', 30_000)).toBeUndefined();
    await nextTurn();
    expect(leave).not.toHaveBeenCalled();
  });

  it('keeps no entry that did not wait, none on a key that is not a loop, and none when off', () => {
    const leave = jest.fn(() => Promise.resolve());
    const on = new LineHandover(true);
    expect(on.handOn(holding(on, 'free', false), lease(), leave)).toBe(false);
    expect(on.handOn(holding(on, 'once', true), lease(), leave)).toBe(false);
    // A caller asks in a later turn than the leave's answer: not a loop.
    const off = new LineHandover(false);
    loop(off, 'k');
    expect(off.handOn(holding(off, 'k', true), lease(), leave)).toBe(false);
  });

  it('hands a kept entry to no caller asking for a longer lease; lets it go for another mode', () => {
    const handover = new LineHandover(true);
    loop(handover, 'k');
    const leave = jest.fn(() => Promise.resolve());
    handover.handOn(holding(handover, 'k', true), lease(), leave);
    expect(handover.takeKept('k', 60_000)).toBeUndefined();
    expect(handover.letGo('k')).toBeDefined();
    expect(leave).toHaveBeenCalledTimes(1);
    expect(handover.takeKept('k', 30_000)).toBeUndefined();
  });

  it('keeps nothing once the key was closed here (forceRelease), and leaves a kept entry at close', () => {
    const handover = new LineHandover(true);
    loop(handover, 'k');
    const leave = jest.fn(() => Promise.resolve());
    const hold = holding(handover, 'k', true);
    const reopen = handover.closeKey('k');
    expect(handover.handOn(hold, lease(), leave)).toBe(false);
    reopen();
    // The loop asks again right after that release's leave: its next entry is kept.
    loop(handover, 'k');
    handover.handOn(holding(handover, 'k', true), lease(), leave);
    handover.closeAll();
    expect(leave).toHaveBeenCalledTimes(1);
  });
});

describe('LineHandover: one entry per key to follow, in call order', () => {
  const lease = () => ({ end: performance.now() + 30_000, ttlMs: 30_000 });
  const follow = (handover: LineHandover, key: string) =>
    handover.follow({
      key,
      ttlMs: 30_000,
      deadline: performance.now() + 60_000,
      signal: undefined,
      timedOut: () => new Error('timed out'),
    });

  /** An entry of ours on `key` that waits in line, with `count` callers queued behind it. */
  function waitingWith(handover: LineHandover, key: string, count: number) {
    const entry = handover.opened(key, false);
    const queued = Array.from({ length: count }, () => follow(handover, key));
    return { entry, queued };
  }

  it('queues every caller behind the open entry, past its 16 fences, and opens no other', async () => {
    const handover = new LineHandover(true);
    const { queued } = waitingWith(handover, 'k', 20);
    expect(queued.every((promise) => promise !== undefined)).toBe(true);
    // A second entry here would take later callers ahead of those still queued at its run's end.
    expect(handover.opened('k', false)).toBeUndefined();
    expect(handover.size).toBe(20);
    // forceRelease's barrier reaches the entry: nobody is handed a removed entry.
    const reopen = handover.closeKey('k');
    await expect(Promise.all(queued.map((promise) => promise!))).resolves.toEqual(
      Array.from({ length: 20 }, () => undefined),
    );
    expect(handover.size).toBe(0);
    reopen();
    // Dissolved: the first caller to join again opens the next entry.
    expect(handover.opened('k', false)).toBeDefined();
    handover.closeAll();
  });

  it('hands the entry on up to its last fence; as it hands that one, the first caller still queued makes the next entry and the others stay queued, ahead of later callers', async () => {
    const handover = new LineHandover(true);
    const { entry, queued } = waitingWith(handover, 'k', 20);
    handover.held(entry);
    const settled: number[] = [];
    const outcomes = queued.map((promise, i) =>
      promise!.then((outcome) => {
        settled.push(i);
        return outcome;
      }),
    );
    const leave = jest.fn(() => Promise.resolve());
    const first = { key: 'k', token: 't', fence: 32n, leaseEnd: lease().end, ttlMs: 30_000 };
    let hold: LineHold = { ...first, followers: entry };
    for (let i = 0; i < 15; i += 1) {
      expect(handover.handOn(hold, lease(), leave)).toBe(true);
      hold = { ...hold, fence: ((await outcomes[i]) as LineHold).fence };
    }
    // The last fence is handed: the 16th caller is told to make the next entry now, while it
    // works; the 4 after it stay queued, and a caller who comes now queues behind them.
    await Promise.resolve();
    expect(settled).toEqual(Array.from({ length: 16 }, (_, i) => i));
    const next = (await outcomes[15]) as EntryFollowers;
    expect(next).toBeInstanceOf(EntryFollowers);
    const later = follow(handover, 'k');
    expect(later).toBeDefined();
    expect(handover.size).toBe(5);
    // The entry's 16 fences are taken: the release leaves.
    expect(handover.handOn(hold, lease(), leave)).toBe(false);
    // The 16th caller's join holds: the next entry is the one the others queue behind.
    expect(handover.opened('k', true, next)).toBe(next);
    const nextHold: LineHold = { ...first, fence: 48n, followers: next };
    expect(handover.handOn(nextHold, lease(), leave)).toBe(true);
    expect(((await outcomes[16]) as LineHold).fence).toBe(49n);
    expect(settled.at(-1)).toBe(16);
    expect(leave).not.toHaveBeenCalled();
    handover.closeAll();
    await expect(later).resolves.toBeUndefined();
  });

  it('a caller told to make the next entry that gives up passes that to the next caller queued', async () => {
    const handover = new LineHandover(true);
    const { entry, queued } = waitingWith(handover, 'k', 3);
    handover.dissolved(entry);
    const opener = (await queued[0]) as EntryFollowers;
    expect(opener).toBeInstanceOf(EntryFollowers);
    // Its join failed: the next caller makes the entry, the last one stays queued behind.
    handover.dissolved(opener);
    expect(await queued[1]).toBeInstanceOf(EntryFollowers);
    expect(handover.size).toBe(1);
    handover.closeAll();
    await expect(queued[2]).resolves.toBeUndefined();
  });

  it('opens no entry on a key while an operator command removes its holders', () => {
    const handover = new LineHandover(true);
    const reopen = handover.closeKey('k');
    // A join answered "holds" meanwhile: the command removes its entry too, so nobody follows.
    expect(handover.opened('k', true)).toBeUndefined();
    expect(follow(handover, 'k')).toBeUndefined();
    expect(handover.opened('other', true)).toBeDefined();
    reopen();
    reopen();
    expect(handover.opened('k', true)).toBeDefined();
    handover.closeAll();
  });
});
