import { LineAttempt } from './line-attempt';
import { joinRefused } from './line-refusals';
import type { LineWaiters } from './waiting/line-waiters';

// Keys may be 512 bytes: messages show at most their first 64 characters, as everywhere else.
const longKey = `orders:${'x'.repeat(400)}`;
const shownKey = JSON.stringify(`${longKey.slice(0, 64)}…`);
const exclusive = { mode: 'exclusive' } as const;

describe('acquisition messages quote a long key shortened', () => {
  it('a full line', () => {
    const error = joinRefused(
      { key: longKey, kind: exclusive, timeoutMs: 1_000 },
      {
        joined: false,
        reason: 'full',
        holderId: 'h',
        retryAfterMs: 10,
        inUse: { exclusiveLive: true, permits: null },
      },
    );
    expect(error.message).toContain(`Lock ${shownKey} not acquired:`);
    expect(error.message).not.toContain(longKey);
  });

  it('MongoDB silent before any reply', () => {
    const request = { key: longKey, kind: exclusive, ttlMs: 5_000, timeoutMs: 1_000 };
    const attempt = new LineAttempt(request, performance.now(), {} as LineWaiters);
    const error = attempt.unanswered(1_000);
    expect(error.message).toContain(`acquisition of ${shownKey} within`);
    expect(error.message).not.toContain(longKey);
  });
});
