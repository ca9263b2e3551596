import { LockStoreUnavailableError } from '../../errors/lock-store-unavailable.error';
import { MongoLockError } from '../../errors/mongo-lock.error';
import { HeldDocumentLeases, LeaseReleaseTries } from './document-release-tries';
import type { ReleaseLeaseOutcome } from '../release-lease';

describe('LeaseReleaseTries (when a release of a document lock is a retry)', () => {
  /** Sends a release whose reply is `outcome` (or an error); resolves to whether it was a retry. */
  async function release(tries: LeaseReleaseTries, outcome: ReleaseLeaseOutcome | Error) {
    let retry: boolean | undefined;
    await tries
      .release(async (isRetry) => {
        retry = isRetry;
        if (outcome instanceof Error) throw outcome;
        return outcome;
      })
      .catch(() => undefined);
    return retry;
  }

  it('a first release goes by token; one after a release that got no reply is a retry', async () => {
    const tries = new LeaseReleaseTries(10n);
    expect(await release(tries, new LockStoreUnavailableError('reply lost'))).toBe(false);
    expect(tries.mayHaveLanded).toBe(true);
    expect(tries.lossUntold).toBe(true);
    expect(await release(tries, 'released')).toBe(true);
    expect(tries.lossUntold).toBe(false);
  });

  it('a release or commit that MongoDB refused wrote nothing: the next release goes by token', async () => {
    const tries = new LeaseReleaseTries(10n);
    const refused = new MongoLockError('Lock command commit failed: Document failed validation');
    await tries.commit(() => Promise.reject(refused)).catch(() => undefined);
    expect(await release(tries, refused)).toBe(false);
    expect(await release(tries, 'released')).toBe(false);
  });

  it('a retry that finds the lock lost cannot tell; one that finds the lease run out can', async () => {
    const untold = new LeaseReleaseTries(10n);
    await release(untold, new LockStoreUnavailableError('reply lost'));
    await release(untold, 'lost');
    expect(untold.lossUntold).toBe(true);
    const expired = new LeaseReleaseTries(10n);
    await release(expired, new LockStoreUnavailableError('reply lost'));
    await release(expired, 'expired');
    expect(expired.lossUntold).toBe(false);
  });

  it('a release sent while an earlier one is still on its way (its wait timed out) is a retry', async () => {
    const tries = new LeaseReleaseTries(10n);
    let answer!: (outcome: ReleaseLeaseOutcome) => void;
    const first = tries.release(() => new Promise((resolve) => (answer = resolve)));
    expect(tries.mayHaveLanded).toBe(true);
    expect(await release(tries, 'lost')).toBe(true);
    expect(tries.lossUntold).toBe(true);
    // The first arrives late, having found the lock gone: neither wrote, and the reply tells.
    answer('lost');
    await first;
    expect(tries.mayHaveLanded).toBe(false);
    expect(tries.lossUntold).toBe(false);
  });

  it('a release after a commit with no reply is a retry; after a commit that wrote nothing, not', async () => {
    const unknown = new LeaseReleaseTries(10n);
    await unknown
      .commit(() => Promise.reject(new LockStoreUnavailableError('reply lost')))
      .catch(() => undefined);
    expect(await release(unknown, 'released')).toBe(true);
    const refused = new LeaseReleaseTries(10n);
    expect(await refused.commit(() => Promise.resolve(null))).toBeNull();
    expect(await release(refused, 'lost')).toBe(false);
    expect(refused.lossUntold).toBe(false);
  });

  it('a first release that found the lock lost tells: a loss, not an unknown outcome', async () => {
    const tries = new LeaseReleaseTries(10n);
    await release(tries, 'lost');
    expect(tries.mayHaveLanded).toBe(false);
    expect(tries.lossUntold).toBe(false);
    expect(await release(tries, 'lost')).toBe(false);
  });
});

describe('HeldDocumentLeases', () => {
  it('knows a lease by key, owner and fence, until forgotten', () => {
    const held = new HeldDocumentLeases();
    const tries = held.track('k', 'token', 10n);
    expect(held.of('k', 'token', 10n)).toBe(tries);
    // One token serves every attempt of a call: an earlier lease of it is another lease.
    expect(held.of('k', 'token', 9n)).toBeUndefined();
    expect(held.of('k', 'token', undefined)).toBeUndefined();
    expect(held.of('k', 'other', 10n)).toBeUndefined();
    const later = held.track('k', 'token', 11n);
    held.forget('k', 'token', tries); // not the one held now: kept
    expect(held.of('k', 'token', 11n)).toBe(later);
    held.forget('k', 'token', later);
    expect(held.size).toBe(0);
  });
});
