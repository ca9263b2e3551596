import { pollDelayMs } from './wait-timing';

const timing = { pollIntervalMs: 50, maxPollIntervalMs: 1_000 };

describe('pollDelayMs', () => {
  it('doubles per round, between half and all of the nominal delay', () => {
    expect(pollDelayMs(0, timing, () => 0)).toBe(25);
    expect(pollDelayMs(0, timing, () => 1)).toBe(50);
    expect(pollDelayMs(3, timing, () => 0)).toBe(200);
    expect(pollDelayMs(3, timing, () => 1)).toBe(400);
  });

  it('is capped by maxPollIntervalMs, however many rounds', () => {
    expect(pollDelayMs(10, timing, () => 1)).toBe(1_000);
    expect(pollDelayMs(10_000, timing, () => 1)).toBe(1_000);
    expect(pollDelayMs(10_000, timing, () => 0)).toBe(500);
  });
});
