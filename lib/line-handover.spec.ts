import { setImmediate } from 'node:timers';
import { LineHandover } from './line-handover';
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

describe('LineHandover: an entry without room', () => {
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

  it('lets the next entry here take followers, while its own queue still waits for it', async () => {
    const handover = new LineHandover(true);
    // 15 followers: with the first holder, the entry's 16 fences.
    const { entry, queued } = waitingWith(handover, 'k', 15);
    expect(queued.every((promise) => promise !== undefined)).toBe(true);
    expect(entry?.room).toBe(false);
    expect(follow(handover, 'k')).toBeUndefined();
    // A caller who joined the line itself: callers who come now may follow its entry.
    const next = handover.opened('k', false);
    expect(next).toBeDefined();
    expect(next).not.toBe(entry);
    const behindNext = follow(handover, 'k');
    expect(behindNext).toBeDefined();
    expect(handover.size).toBe(16);
    // forceRelease's barrier reaches both entries: nobody is handed a removed entry.
    handover.closeKey('k');
    await expect(Promise.all([...queued, behindNext])).resolves.toEqual(
      Array.from({ length: 16 }, () => undefined),
    );
    expect(handover.size).toBe(0);
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

  it('takes no new entry while the open one has room', () => {
    const handover = new LineHandover(true);
    const { entry } = waitingWith(handover, 'k', 3);
    expect(entry?.room).toBe(true);
    expect(handover.opened('k', false)).toBeUndefined();
    handover.closeAll();
    expect(handover.size).toBe(0);
  });
});
