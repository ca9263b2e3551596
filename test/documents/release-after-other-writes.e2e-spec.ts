// A release of a document lock goes by its owner token: it leaves the line in the lock field by
// removing our entry. When other code wrote the lock field while the lock was held (a copy of
// the document written back by `replaceOne`, an unlock by hand in any form), our entry is gone,
// the lock was lost and `release()` says so, whatever locks came after. A release tried again
// after one that MongoDB did not confirm finds our entry gone just the same, and reports the
// loss (no past owners are kept: docs/engine-v2.md); a retry that finds our entry with its lease
// run out is a loss too (the first try never landed).
import type { Collection, Document } from 'mongodb';
import type { DocumentLocks } from '../../lib/documents/document-locks';
import type { DocumentLockHandle } from '../../lib/documents/document-lock-handle';
import { LockLostError, LockStoreUnavailableError } from '../../lib/errors';
import { withOneAccount, type Account } from './account-fixture';
import { eventually, LockTestKit } from '../lock-service/lock-test-kit';
import {
  describeWithFailPoints,
  faultTools,
  settleWithin,
  writeConcernTimeout,
} from '../lock-service/adversarial/kit';

jest.setTimeout(60_000);

/** What a release of a lease that was not ours any more says. */
const LOST_BEFORE_RELEASE = /its lease had ended or another holder had taken it before release/;

/** Unlocks by hand that other code may write (the first is the documented one). */
const forceUnlocks: [string, Document][] = [
  ['the line unset', { $unset: { '_lock.line': '' } }],
  ['the line emptied, as a release leaves it', { $set: { '_lock.line': [] } }],
  ['the lock field unset', { $unset: { _lock: '' } }],
];

/** What others do after the unlock by hand and before our release. */
const meanwhiles: [string, (others: DocumentLocks<Account>) => Promise<void>][] = [
  ['nobody locked it since', async () => undefined],
  [
    'another locked and committed it since',
    async (others) => void (await (await others.acquire('a')).commit({ $inc: { balance: 1 } })),
  ],
  ['another locked and released it since', async (others) => (await others.acquire('a')).release()],
];

const cases = forceUnlocks.flatMap(([form, update]) =>
  meanwhiles.map(([meanwhile, run]) => [form, meanwhile, update, run] as const),
);

async function expectLost(lock: DocumentLockHandle<Account>, release = lock.release()) {
  const released = await settleWithin(release, 5_000);
  expect(released.status).toBe('rejected');
  expect(released.error).toBeInstanceOf(LockLostError);
  expect(lock.lost).toBe(true);
  expect(lock.signal.aborted).toBe(true);
  return released.error as LockLostError;
}

describe('A single release of a document lock whose field other code wrote during the hold', () => {
  const kit = LockTestKit.forSuite();
  let accounts: Collection<Account>;
  let collectionName: string;

  beforeEach(async () => {
    ({ accounts, collectionName } = await withOneAccount(kit));
  });

  const docs = async () => (await kit.service()).documents<Account>(collectionName);

  it.each([
    ['then another locked and committed it', true],
    ['nobody locked it since', false],
  ])(
    'a copy of the document written back (read, then replaceOne) wiped the lock, %s: the release reports it lost',
    async (_, otherCommits) => {
      const ours = await docs();
      // An earlier lock, released: the copy carries its released lock field (older fences).
      await (await ours.acquire('a')).release();
      const copy = (await accounts.findOne({ _id: 'a' })) as Account;
      const lock = await ours.acquire('a', { renew: false });
      await accounts.replaceOne({ _id: 'a' }, { ...copy, balance: copy.balance + 5 });
      if (otherCommits) {
        const next = await (await docs()).acquire('a');
        expect(next.fence).toBeGreaterThan(lock.fence);
        await next.commit({ $inc: { balance: 1 } });
      }
      const error = await expectLost(lock);
      expect(error.message).toMatch(LOST_BEFORE_RELEASE);
    },
  );

  it.each(cases)(
    'unlocked by hand (%s), %s: the release reports it lost',
    async (_, __, unlock, meanwhile) => {
      const lock = await (await docs()).acquire('a', { renew: false });
      await accounts.updateOne({ _id: 'a' }, unlock);
      await meanwhile(await docs());
      const error = await expectLost(lock);
      expect(error.message).toMatch(LOST_BEFORE_RELEASE);
    },
  );

  it('unlocked by hand, then another holds it: the release reports it lost and leaves the holder alone', async () => {
    const lock = await (await docs()).acquire('a', { renew: false });
    await accounts.updateOne({ _id: 'a' }, forceUnlocks[0][1]);
    const other = await kit.service();
    const holder = await other.documents<Account>(collectionName).acquire('a');
    try {
      await expectLost(lock);
      const line = (await accounts.findOne({ _id: 'a' }))?._lock?.line as { h: string }[];
      expect(line).toHaveLength(1);
      expect(line[0].h).toBe(other.holderId);
      expect(holder.lost).toBe(false);
    } finally {
      await holder.release();
    }
  });

  it('keeps a handle among those held only while it holds (released, committed, lost)', async () => {
    const service = await kit.service();
    const ours = service.documents<Account>(collectionName);
    const held = () => service.diagnostics.held;
    const released = await ours.acquire('a');
    expect(held()).toBe(1);
    await released.release();
    expect(held()).toBe(0);
    const committed = await ours.acquire('a');
    await committed.commit({ $inc: { balance: 1 } });
    expect(held()).toBe(0);
    const lost = await ours.acquire('a', { renew: false });
    await accounts.updateOne({ _id: 'a' }, forceUnlocks[0][1]);
    await expectLost(lost);
    await ours.withLock('a', () => expect(held()).toBe(1));
    await new Promise((resolve) => setImmediate(resolve));
    expect(held()).toBe(0);
  });
});

describeWithFailPoints('A release tried again after one MongoDB did not confirm', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);
  let accounts: Collection<Account>;
  let collectionName: string;

  beforeEach(async () => {
    ({ accounts, collectionName } = await withOneAccount(kit));
  });

  const docs = async () => (await kit.service()).documents<Account>(collectionName);

  async function holder(appName: string, ttlMs = 20_000) {
    const client = await appClient(appName);
    const service = await kit.service({ client });
    const locks = service.documents<Account>(collectionName);
    return { lock: await locks.acquire('a', { ttlMs, renew: false }), holderId: service.holderId };
  }

  it.each(cases)(
    'unlocked by hand (%s) before a release whose reply was lost, %s: the retry does not take it for ours',
    async (_, __, unlock, meanwhile) => {
      const { lock } = await holder('unlocked-then-lost');
      await accounts.updateOne({ _id: 'a' }, unlock);
      // Applied (it finds no entry of ours and writes nothing), its reply a write concern error.
      await failPoint({ times: 1 }, writeConcernTimeout('unlocked-then-lost'));
      const first = await settleWithin(lock.release(), 5_000);
      expect(first.error).toBeInstanceOf(LockStoreUnavailableError);
      await meanwhile(await docs());
      // Our entry is gone, as after a release that landed: the retry reports the loss.
      const error = await expectLost(lock);
      expect(error.message).toMatch(LOST_BEFORE_RELEASE);
    },
  );

  it('a commit MongoDB refused (it wrote nothing) leaves the release that follows it to the owner token', async () => {
    const appName = 'commit-refused';
    const ours = await docs();
    await (await ours.acquire('a')).release();
    const copy = (await accounts.findOne({ _id: 'a' })) as Account;
    const { lock } = await holder(appName);
    // Other code writes back the copy (its line empty); another locks and commits.
    await accounts.replaceOne({ _id: 'a' }, copy);
    await (await (await docs()).acquire('a')).commit({ $inc: { balance: 1 } });
    // The commit is refused: a validation error, after which nothing was written.
    await failPoint(
      { times: 1 },
      { failCommands: ['findAndModify', 'update'], appName, errorCode: 121, errorLabels: [] },
    );
    const committed = await settleWithin(lock.commit({ $inc: { balance: 10 } }), 5_000);
    expect(committed.status).toBe('rejected');
    expect(committed.error).not.toBeInstanceOf(LockStoreUnavailableError);
    // The release the library sends after it finds the lock not ours: lost, not taken for an
    // earlier success.
    await eventually(() => lock.lost, 5_000);
    expect(lock.signal.aborted).toBe(true);
  });

  it('a retry that finds our entry with the lease run out is a plain loss: the first try never landed', async () => {
    const appName = 'never-landed';
    const { lock, holderId } = await holder(appName);
    // The release never arrives (the driver's own retry fails too), nor do its retries in the
    // background, until the failpoint is off.
    await failPoint('alwaysOn', {
      failCommands: ['findAndModify'],
      appName,
      closeConnection: true,
    });
    const first = await settleWithin(lock.release(), 5_000);
    expect(first.error).toBeInstanceOf(LockStoreUnavailableError);
    // Let go, though not confirmed: nothing is written under it any more.
    await expect(lock.update({ $inc: { balance: 5 } })).rejects.toThrow(/was released/);
    expect((await accounts.findOne({ _id: 'a' }))?._lock?.line).toMatchObject([{ h: holderId }]);
    // The lease runs out on the server while the holder still counts on it (here by hand: the
    // offline test server fixes $$NOW before a blocked command, so a late retry cannot show it).
    await accounts.updateOne({ _id: 'a' }, { $set: { '_lock.line.0.e': new Date(0) } });
    await failPoint('off');
    // The retry in the background finds the entry ended: a loss, not a release.
    await eventually(() => lock.lost, 5_000);
    const error = await expectLost(lock);
    expect(error.message).toMatch(LOST_BEFORE_RELEASE);
    // The ended entry holds nothing: another takes the document at once.
    const next = await (await docs()).acquire('a', { timeoutMs: 0 });
    expect(next.fence).toBeGreaterThan(lock.fence);
    await next.release();
  });
});
