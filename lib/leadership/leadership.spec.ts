import { Logger } from '@nestjs/common';
import { NEVER, Subject } from 'rxjs';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import type { MongoLockHandle } from '../lock-handle';
import { Leadership, type LeadershipHost } from './leadership';

/** A host that acquires by `acquire` and watches nothing. */
function hostOf(acquire: LeadershipHost['acquire']): LeadershipHost {
  return {
    acquire,
    termBegan: () => undefined,
    inspect: () => Promise.resolve(null),
    events$: NEVER,
    eventsFlow: () => true,
    pollIntervalMs: 60_000,
    safetyPollIntervalMs: 60_000,
    answerWithinMs: 1_000,
    renewalIntervalRatio: 1 / 3,
  };
}

/** A host whose every acquisition fails with `failure()`; counts the attempts. */
function failingHost(failure: () => Error): LeadershipHost & { attempts: number } {
  const host = Object.assign(
    hostOf(() => {
      host.attempts += 1;
      return Promise.reject(failure());
    }),
    { attempts: 0 },
  );
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

  it('a campaign that times out while MongoDB is unreachable says so, as acquire does', async () => {
    const unreachable = new LockStoreUnavailableError('unreachable');
    const leadership = new Leadership(
      'jobs',
      'leader:jobs',
      1_000,
      failingHost(() => unreachable),
    );
    const waited = leadership.campaign({ timeoutMs: 300 }).catch((error: unknown) => error);
    const tried = leadership.campaign({ timeoutMs: 0 }).catch((error: unknown) => error);
    const outcomes = await Promise.all([waited, tried]);
    await leadership.close();
    expect(outcomes.map((error) => (error as Error).name)).toEqual([
      'LockStoreUnavailableError',
      'LockStoreUnavailableError',
    ]);
    expect((outcomes[0] as Error).cause).toBe(unreachable);
  });

  it('once an attempt is answered (in line), a timeout is no outage', async () => {
    let attempts = 0;
    const host = hostOf((_key, options, queued) => {
      attempts += 1;
      if (attempts === 1) return Promise.reject(new LockStoreUnavailableError('unreachable'));
      queued();
      return new Promise((_resolve, reject) =>
        options.signal?.addEventListener('abort', () => reject(options.signal?.reason as Error)),
      );
    });
    const leadership = new Leadership('jobs', 'leader:jobs', 1_000, host);
    const outcome = await leadership
      .campaign({ timeoutMs: 1_500 })
      .catch((error: unknown) => error);
    await leadership.close();
    expect(attempts).toBe(2);
    expect(outcome).toBeInstanceOf(LockNotAcquiredError);
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

/** A handle as `acquire` gives it; `lost` ones have their signal aborted already. */
function handleOf(fence: bigint, lost: boolean): MongoLockHandle {
  const abort = new AbortController();
  if (lost) abort.abort(new Error('lost in a pause'));
  let done!: () => void;
  const handle = {
    fence,
    signal: abort.signal,
    lost$: new Subject(),
    done: new Promise<void>((resolve) => (done = resolve)),
    expiresAt: new Date(Date.now() + 60_000),
    release: () => {
      abort.abort(new Error('released'));
      done();
      return lost ? Promise.reject(new Error('lost')) : Promise.resolve();
    },
  };
  return handle as unknown as MongoLockHandle;
}

describe('Leadership terms', () => {
  it('never hands out a term whose lock was lost before it was handed out', async () => {
    const handles = [handleOf(1n, true), handleOf(2n, false)];
    const host = hostOf(() => Promise.resolve(handles.shift() ?? handleOf(3n, false)));
    const leadership = new Leadership('jobs', 'leader:jobs', 1_000, host);
    const fences: bigint[] = [];
    const subscription = leadership.terms$.subscribe((term) => fences.push(term.fence));
    const term = await leadership.campaign();
    expect(term.fence).toBe(2n);
    expect(term.active).toBe(true);
    expect(fences).toEqual([2n]);
    subscription.unsubscribe();
    await leadership.close();
  });
});

describe('Leadership campaigns that give up', () => {
  it('leave nothing on an election that goes on (a follower may campaign for weeks)', async () => {
    // Held elsewhere: the join's reply puts the call in line, where it waits until aborted.
    const host = hostOf((_key, options, queued) => {
      queued();
      return new Promise((_resolve, reject) =>
        options.signal?.addEventListener('abort', () => reject(options.signal?.reason as Error)),
      );
    });
    const leadership = new Leadership('jobs', 'leader:jobs', 1_000, host);
    const subscription = leadership.terms$.subscribe();
    for (let call = 0; call < 5; call += 1) {
      await expect(leadership.campaign({ timeoutMs: 0 })).rejects.toBeInstanceOf(
        LockNotAcquiredError,
      );
    }
    const { election } = leadership as unknown as { election: { waiters: Set<unknown> } };
    // Only the standing campaign of terms$ still waits.
    expect(election.waiters.size).toBe(1);
    subscription.unsubscribe();
    await leadership.close();
  });
});

describe('Leadership options and first answers', () => {
  it('refuses option names it does not know', () => {
    const leadership = new Leadership(
      'jobs',
      'leader:jobs',
      1_000,
      failingHost(() => new Error()),
    );
    return expect(leadership.campaign({ timeOutMs: 0 } as never)).rejects.toThrow(
      /timeOutMs is not an option \(did you mean timeoutMs\?\)/,
    );
  });

  it("a campaign's timeout runs from the join's reply: even 0 gets an answer", async () => {
    let queued!: () => void;
    const host = hostOf((_key, options, told) => {
      queued = told;
      return new Promise((_resolve, reject) =>
        options.signal?.addEventListener('abort', () => reject(options.signal?.reason as Error)),
      );
    });
    const leadership = new Leadership('jobs', 'leader:jobs', 1_000, host);
    let outcome: unknown;
    const campaign = leadership.campaign({ timeoutMs: 0 }).catch((error: unknown) => error);
    void campaign.then((error) => (outcome = error));
    await sleep(50);
    expect(outcome).toBeUndefined();
    // The reply: in line behind a leader.
    queued();
    expect(await campaign).toBeInstanceOf(LockNotAcquiredError);
    await leadership.close();
  });

  it('a campaign whose first win was lost at birth still times out', async () => {
    // The first try wins a lock already lost; then the wait in line lasts until aborted.
    let tries = 0;
    const host = hostOf((_key, options) =>
      tries++ === 0
        ? Promise.resolve(handleOf(1n, true))
        : new Promise((_resolve, reject) =>
            options.signal?.addEventListener('abort', () =>
              reject(options.signal?.reason as Error),
            ),
          ),
    );
    const leadership = new Leadership('jobs', 'leader:jobs', 1_000, host);
    await expect(leadership.campaign({ timeoutMs: 100 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await leadership.close();
  });
});
