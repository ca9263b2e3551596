import { wakeUp } from './timers';

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
