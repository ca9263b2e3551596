import { LockLostError } from '../errors/lock-lost.error';
import type { HeldKey, LeaseOperations, RenewLeaseOutcome } from '../lease-keeper';
import { MongoLockHandle } from '../lock-handle';
import { MongoDocumentLockHandle, type DocumentLockWriter } from './document-lock-handle';

/** A held lock of a 1 s lease whose scheduled renewal comes at 500 ms. */
function renewingLock(operations: Omit<LeaseOperations, 'ended'>): MongoLockHandle {
  return new MongoLockHandle({
    held: [{ key: 'k', owner: 'token', fence: 1n }],
    leaseEnd: performance.now() + 1_000,
    ttlMs: 1_000,
    renew: true,
    renewalIntervalRatio: 0.5,
    maxHoldMs: 3_600_000,
    operations: { ...operations, ended: () => undefined },
  });
}

describe('MongoDocumentLockHandle.commit', () => {
  it('sends no renewal past its commit, and lets the one in flight answer first', async () => {
    let committed = false;
    let answerRenewal!: () => void;
    const renewals: string[] = [];
    const lock = renewingLock({
      // As MongoDB answers: a renewal that runs after the commit finds the entry gone.
      renew: (held: HeldKey) => {
        renewals.push(held.key);
        return new Promise<RenewLeaseOutcome>((resolve) => {
          answerRenewal = () =>
            resolve(
              committed
                ? { renewed: false, sentAt: performance.now() }
                : { renewed: true, sentAt: performance.now(), remainingMs: 1_000 },
            );
        });
      },
      release: () => Promise.resolve('released'),
      giveBack: () => Promise.resolve('released'),
    });
    const writer: DocumentLockWriter = {
      timeoutMs: 5_000,
      check: (update) => update as never,
      // The commit lands at once; its reply comes 50 ms later.
      write: () => {
        committed = true;
        return new Promise((resolve) => setTimeout(() => resolve({ _id: 'k', n: 1 }), 50));
      },
    };
    const handle = new MongoDocumentLockHandle(lock, { _id: 'k' }, false, writer);
    // The scheduled renewal (at 500 ms) is in flight when the commit is asked for.
    await new Promise((resolve) => setTimeout(resolve, 550));
    expect(renewals).toEqual(['k']);
    const commit = handle.commit({ $inc: { n: 1 } });
    await new Promise((resolve) => setTimeout(resolve, 20));
    answerRenewal();
    await expect(commit).resolves.toEqual({ _id: 'k', n: 1 });
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(lock.lost).toBe(false);
    expect(renewals).toEqual(['k']);
  });
});

describe('MongoDocumentLockHandle.commit after a loss', () => {
  it('writes nothing when the renewal it waited for found the lock lost', async () => {
    let answerRenewal!: () => void;
    const lock = renewingLock({
      renew: () =>
        new Promise<RenewLeaseOutcome>((resolve) => {
          answerRenewal = () => resolve({ renewed: false, sentAt: performance.now() });
        }),
      release: () => Promise.resolve('lost'),
      giveBack: () => Promise.resolve('lost'),
    });
    const write = jest.fn();
    const writer: DocumentLockWriter = {
      timeoutMs: 5_000,
      check: (update) => update as never,
      write,
    };
    const handle = new MongoDocumentLockHandle(lock, { _id: 'k' }, false, writer);
    await new Promise((resolve) => setTimeout(resolve, 550));
    const commit = handle.commit({ $inc: { n: 1 } });
    answerRenewal();
    await expect(commit).rejects.toBeInstanceOf(LockLostError);
    expect(lock.lost).toBe(true);
    expect(write).not.toHaveBeenCalled();
  });
});
