import { Logger } from '@nestjs/common';
import { NEVER } from 'rxjs';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import type { MongoLockHandle } from '../lock-handle';
import { Leadership, type LeadershipHost } from './leadership';

/** A host whose every acquisition fails with `failure()`; counts the attempts. */
function failingHost(failure: () => Error): LeadershipHost & { attempts: number } {
  const host = {
    attempts: 0,
    acquire(): Promise<MongoLockHandle> {
      host.attempts += 1;
      return Promise.reject(failure());
    },
    termBegan: () => undefined,
    inspect: () => Promise.resolve(null),
    events$: NEVER,
    eventsFlow: () => true,
    pollIntervalMs: 60_000,
    safetyPollIntervalMs: 60_000,
  };
  return host;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Leadership retries', () => {
  beforeAll(() => Logger.overrideLogger(false));
  afterAll(() => Logger.overrideLogger(['error', 'warn', 'log']));

  it('pauses a second between attempts while MongoDB is unreachable', async () => {
    const host = failingHost(() => new LockStoreUnavailableError('unreachable'));
    const leadership = new Leadership('jobs', 'leader:jobs', 1_000, host);
    const campaign = leadership.campaign({ timeoutMs: 60_000 }).catch((error: unknown) => error);
    await sleep(1_500);
    // A first try, and one more after the pause (without it: thousands of attempts).
    expect(host.attempts).toBeGreaterThanOrEqual(2);
    expect(host.attempts).toBeLessThanOrEqual(3);
    await leadership.close();
    await campaign;
  });

  it('terms$ campaigns again a second after a campaign fails for good', async () => {
    const host = failingHost(() => new Error('not a lock failure'));
    const leadership = new Leadership('jobs', 'leader:jobs', 1_000, host);
    const subscription = leadership.terms$.subscribe();
    await sleep(1_500);
    expect(host.attempts).toBeGreaterThanOrEqual(2);
    expect(host.attempts).toBeLessThanOrEqual(3);
    subscription.unsubscribe();
    await leadership.close();
  });
});
