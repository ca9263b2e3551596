// eslint-disable-next-line @typescript-eslint/no-require-imports -- the module object itself, so that its setTimeout can be spied on
import timers = require('node:timers');
import { MAX_TIMER_MS, settlesWithin, wakeUp } from './timers';

describe('wakeUp', () => {
  it('never wakes by its timer before `until` by performance.now()', async () => {
    // A plain timer fires up to a millisecond early by this clock, often within 30 tries.
    for (let round = 0; round < 40; round += 1) {
      const until = performance.now() + 3 + Math.random() * 7;
      expect(await wakeUp({}, until, undefined)).toBe('timer');
      expect(performance.now()).toBeGreaterThanOrEqual(until);
    }
  });

  it('wakes at once for a signal already aborted, and for news', async () => {
    const far = performance.now() + 60_000;
    expect(await wakeUp({}, far, AbortSignal.abort())).toBe('aborted');
    expect(await wakeUp({ heard: Promise.resolve() }, far, undefined)).toBe('heard');
  });
});

describe('timers beyond setTimeout’s range', () => {
  // A longer delay makes Node fire at once (with a warning): a wait would spin on its timer.
  const armed = () => jest.spyOn(timers, 'setTimeout');
  afterEach(() => jest.restoreAllMocks());
  const pause = () => new Promise((resolve) => globalThis.setTimeout(resolve, 50));

  it('wakeUp waits past 2^31 - 1 ms on one timer', async () => {
    const setTimeoutCalls = armed();
    const aborted = new AbortController();
    const woke = wakeUp({}, performance.now() + MAX_TIMER_MS + 10_000, aborted.signal);
    await pause();
    aborted.abort();
    expect(await woke).toBe('aborted');
    expect(setTimeoutCalls).toHaveBeenCalledTimes(1);
  });

  it('settlesWithin waits past 2^31 - 1 ms for a task', async () => {
    let settle = () => {};
    const task = new Promise<void>((resolve) => (settle = resolve));
    const within = settlesWithin(task, MAX_TIMER_MS + 10_000);
    await pause();
    settle();
    expect(await within).toBe(true);
  });
});
