// A document lock lives in the user's own document, which every plain read returns: once given
// up it leaves no past owners there, only `{ owner: null, holder, fence, lostFence }`. A release
// goes by owner token; one tried again after a release or commit that MongoDB did not confirm (a
// write concern error after the write, a lost reply) still recognises its own success from the
// fences alone, however many locks came since, unless one of those ended without a release (or
// other code unlocked it, in any form): then the outcome cannot be told, and the release says
// so. Lock fields written by earlier versions (a ring of 32 released owners) heal on the next
// lock.
import { BSON, Long } from 'mongodb';
import type { Collection, Document, MongoClient } from 'mongodb';
import type { DocumentLocks } from '../../lib/documents/document-locks';
import type { LockHandle } from '../../lib/lock-handle';
import { LockLostError, LockStoreUnavailableError } from '../../lib/errors';
import { toBigInt } from '../../lib/store/bson-values';
import type { BsonInteger } from '../../lib/store/bson-values';
import { documentLeaseCommands } from '../../lib/store/documents/document-lease-commands';
import { keyOfDocumentId } from '../../lib/store/documents/document-key';
import { DocumentLockFields } from '../../lib/store/documents/document-lock-fields';
import { HeldDocumentLeases } from '../../lib/store/documents/document-release-tries';
import { leaseLockForm, writeWhileHeld } from '../../lib/store/documents/document-writes';
import type { DocumentUpdate } from '../../lib/store/documents/document-writes';
import type { LeaseCommands } from '../../lib/store/lease-commands';
import { withOneAccount, type Account } from './account-fixture';
import { LockTestKit, eventually, sleep } from '../lock-service/lock-test-kit';
import {
  describeWithFailPoints,
  faultTools,
  settleWithin,
  writeConcernTimeout,
} from '../lock-service/adversarial/kit';

jest.setTimeout(60_000);

const RELEASED_FIELDS = ['owner', 'holder', 'fence', 'lostFence'];
const HELD_FIELDS = [...RELEASED_FIELDS, 'acquiredAt', 'expiresAt'];

/**
 * Store-level commands on one collection, with the user's own writes (a commit's). As in
 * `DocumentLocks`, each lease taken is known (`HeldDocumentLeases`) until the test ends: a
 * release after a release or commit of the same lease is a retry, and looks at the fences.
 */
function storeOf(client: MongoClient, dbName: string, collectionName: string) {
  const collection = client.db(dbName).collection(collectionName);
  const fields = new DocumentLockFields('_lock');
  const held = new HeldDocumentLeases();
  const commands: LeaseCommands = documentLeaseCommands(collection, client, fields, held);
  const target = { collection, lock: leaseLockForm(fields), version: undefined };
  const key = keyOfDocumentId('a');
  const fences = new Map<string, bigint>();
  return {
    take: async (owner: string, ttlMs = 30_000) => {
      const outcome = await commands.attempt({ key, owner, holder: `h-${owner}`, ttlMs });
      if (!outcome.won) throw new Error(`${owner} did not take the document`);
      held.track(key, owner, outcome.fence);
      fences.set(owner, outcome.fence);
      return outcome.fence;
    },
    release: async (owner: string, fence?: bigint) =>
      (await commands.release(key, owner, { fence })).outcome,
    commit: (owner: string, update: DocumentUpdate = { $inc: { balance: 1 } }) => {
      const commit = () => writeWhileHeld(target, key, owner, update, { unlock: true });
      const tries = held.of(key, owner, fences.get(owner));
      return tries ? tries.commit(commit) : commit();
    },
    lock: async () =>
      ((await collection.findOne({ _id: 'a' as never })) as { _lock?: Document } | null)?._lock,
  };
}

describe('The lock field of a document lock', () => {
  const kit = LockTestKit.forSuite();
  let accounts: Collection<Account>;
  let collectionName: string;

  beforeEach(async () => {
    ({ accounts, collectionName } = await withOneAccount(kit));
  });

  const lockField = async () => (await accounts.findOne({ _id: 'a' }))?._lock as Document;

  it('keeps no past owner token after 40 cycles of commit (both forms) and release, and does not grow', async () => {
    const docs = (await kit.service()).documents<Account>(collectionName);
    const other = (await kit.service()).documents<Account>(collectionName);
    const tokens: string[] = [];
    let releasedBytes: number | undefined;
    for (let cycle = 0; cycle < 40; cycle += 1) {
      const lock = await docs.acquire('a');
      const held = await lockField();
      expect(Object.keys(held)).toEqual(HELD_FIELDS);
      tokens.push(held.owner as string);
      // A losing attempt writes nothing.
      expect(await other.tryAcquire('a')).toBeNull();
      if (cycle % 3 === 0) await lock.commit({ $inc: { balance: 1 } });
      else if (cycle % 3 === 1)
        await lock.commit([{ $set: { balance: { $add: ['$balance', 1] } } }]);
      else await lock.release();
      const released = await lockField();
      expect(Object.keys(released)).toEqual(RELEASED_FIELDS);
      expect(released).toMatchObject({ owner: null, holder: expect.any(String) });
      expect(toBigInt(released.fence as BsonInteger)).toBe(lock.fence);
      releasedBytes ??= BSON.calculateObjectSize(released);
      expect(BSON.calculateObjectSize(released)).toBe(releasedBytes);
    }
    const stored = JSON.stringify(await accounts.findOne({ _id: 'a' }));
    expect(new Set(tokens).size).toBe(40);
    for (const token of tokens) expect(stored).not.toContain(token);
    // Owner (null), holder id, two fences: well under the 2.8 KB the ring of owners took.
    expect(releasedBytes).toBeLessThan(150);
  });

  it('a commit, in either form, leaves the released form; a release of that lease tried again is recognised', async () => {
    const client = await kit.client();
    const store = storeOf(client, kit.mongo.dbName, collectionName);
    const byUpdate = await store.take('t1');
    expect(await store.commit('t1')).toMatchObject({ balance: 101 });
    expect(Object.keys((await store.lock()) ?? {})).toEqual(RELEASED_FIELDS);
    expect(await store.release('t1', byUpdate)).toBe('released');
    const byPipeline = await store.take('t2');
    await store.commit('t2', [{ $set: { balance: 7 } }]);
    expect(Object.keys((await store.lock()) ?? {})).toEqual(RELEASED_FIELDS);
    expect(await store.release('t2', byPipeline)).toBe('released');
    // Neither wrote anything: the lock field is as the commit left it.
    const left = await store.lock();
    expect(left).toMatchObject({ owner: null });
    expect(toBigInt(left?.fence as BsonInteger)).toBe(byPipeline);
  });

  it('recognises a release tried again after any number of later locks that ended by release or commit', async () => {
    const client = await kit.client();
    const store = storeOf(client, kit.mongo.dbName, collectionName);
    const ours = await store.take('ours');
    expect(await store.release('ours', ours)).toBe('released');
    expect(await store.release('ours', ours)).toBe('released'); // nobody locked since
    await store.take('next');
    expect(await store.release('ours', ours)).toBe('released'); // another holds it now
    await store.commit('next');
    for (let i = 0; i < 40; i += 1) {
      const later = await store.take(`later-${i}`);
      if (i % 2 === 0) expect(await store.release(`later-${i}`, later)).toBe('released');
      else await store.commit(`later-${i}`);
    }
    expect(await store.release('ours', ours)).toBe('released'); // past the 32 the ring kept
    // A release that does not know its fence (a give-back of an attempt with no reply) cannot
    // be recognised without the token.
    expect(await store.release('ours')).toBe('lost');
  });

  it('cannot tell once a later lease ended without a release (taken over after it ran out), and reports the lock lost', async () => {
    const client = await kit.client();
    const store = storeOf(client, kit.mongo.dbName, collectionName);
    const ours = await store.take('ours');
    expect(await store.release('ours', ours)).toBe('released');
    await store.take('ran-out', 150);
    await sleep(300);
    const tookOver = await store.take('took-over');
    expect(await store.release('ours', ours)).toBe('lost');
    expect(await store.release('took-over', tookOver)).toBe('released');
    // Still lost: `lostFence` only grows.
    expect(await store.release('ours', ours)).toBe('lost');
  });

  // Unlocks by hand that other code may write, none of them the form a release leaves.
  // `fenceKept`: the lock field keeps the unlocked lease's fence, which the next lock then takes
  // for `lostFence`; with no lock field left, it takes the fence before the server's clock.
  it.each<[string, Document, boolean]>([
    ['owner set to null', { $set: { '_lock.owner': null } }, true],
    ['owner and expiresAt removed', { $unset: { '_lock.owner': '', '_lock.expiresAt': '' } }, true],
    [
      'owner and expiresAt set to null',
      { $set: { '_lock.owner': null, '_lock.expiresAt': null } },
      true,
    ],
    [
      'owner, acquiredAt and expiresAt removed',
      { $unset: { '_lock.owner': '', '_lock.acquiredAt': '', '_lock.expiresAt': '' } },
      true,
    ],
    ['the whole lock field removed', { $unset: { _lock: '' } }, false],
  ])('the next lock counts a lease unlocked by hand (%s) as lost', async (_, unlock, fenceKept) => {
    const client = await kit.client();
    const store = storeOf(client, kit.mongo.dbName, collectionName);
    const unlocked = await store.take('unlocked');
    await accounts.updateOne({ _id: 'a' }, unlock);
    // A release by token: lost.
    expect(await store.release('unlocked', unlocked)).toBe('lost');
    await store.take('next');
    const lostFence = toBigInt((await store.lock())?.lostFence as BsonInteger);
    if (fenceKept) expect(lostFence).toBe(unlocked);
    else expect(lostFence).toBeGreaterThanOrEqual(unlocked);
    await store.commit('next');
    expect(await store.release('unlocked', unlocked)).toBe('lost');
  });

  it('the next lock keeps lostFence after a release or a commit (either form), which leave the released form', async () => {
    const client = await kit.client();
    const store = storeOf(client, kit.mongo.dbName, collectionName);
    await store.take('first');
    const lostFence = (await store.lock())?.lostFence as BsonInteger;
    const ends: [string, (owner: string) => Promise<unknown>][] = [
      ['release', async (owner) => store.release(owner)],
      ['commit', (owner) => store.commit(owner)],
      ['commit (pipeline)', (owner) => store.commit(owner, [{ $set: { balance: 1 } }])],
    ];
    await store.release('first');
    for (const [name, end] of ends) {
      await store.take(name);
      expect(toBigInt((await store.lock())?.lostFence as BsonInteger)).toBe(toBigInt(lostFence));
      await end(name);
      expect(Object.keys((await store.lock()) ?? {})).toEqual(RELEASED_FIELDS);
    }
    await store.take('last');
    expect(toBigInt((await store.lock())?.lostFence as BsonInteger)).toBe(toBigInt(lostFence));
  });

  it('does not take a lock unlocked by other code, nor a release after the lease ran out, for a release while live', async () => {
    const client = await kit.client();
    const store = storeOf(client, kit.mongo.dbName, collectionName);
    const unlocked = await store.take('unlocked');
    // A "force unlock" by other code: `owner` set to null, the lease left as it was.
    await accounts.updateOne({ _id: 'a' }, { $set: { '_lock.owner': null } });
    expect(await store.release('unlocked', unlocked)).toBe('lost');
    const next = await store.take('next');
    await store.commit('next');
    expect(await store.release('next', next)).toBe('released');
    expect(await store.release('unlocked', unlocked)).toBe('lost');

    const ranOut = await store.take('ran-out', 150);
    await sleep(300);
    expect(await store.release('ran-out', ranOut)).toBe('expired');
    expect(Object.keys((await store.lock()) ?? {})).toEqual(RELEASED_FIELDS);
    // Tried again: not a release while live.
    expect(await store.release('ran-out', ranOut)).toBe('lost');
  });

  it('heals a lock field written by an earlier version (a ring of released owners) on the next lock', async () => {
    const oldFence = Long.fromNumber(Date.now() - 60_000);
    const ring = Array.from({ length: 32 }, (_, i) => ({
      owner: `old-token-${i}`,
      fence: Long.fromNumber(oldFence.toNumber() - 32 + i),
      until: new Date(Date.now() + 30_000),
    }));
    await accounts.updateOne(
      { _id: 'a' },
      {
        $set: {
          _lock: {
            owner: null,
            holder: 'old-host:1:abc',
            fence: oldFence,
            acquiredAt: new Date(Date.now() - 10_000),
            expiresAt: new Date(Date.now() + 20_000),
            releasedOwners: ring,
            releasedHolder: 'old-host:1:abc',
            releasedFence: oldFence,
          },
        },
      },
    );
    const docs = (await kit.service()).documents<Account>(collectionName);
    const lock = await docs.acquire('a');
    const held = await lockField();
    expect(Object.keys(held)).toEqual(HELD_FIELDS);
    expect(lock.fence).toBeGreaterThan(oldFence.toBigInt());
    // The old lease ended without this version's release: nothing up to it can be recognised.
    expect(toBigInt(held.lostFence as BsonInteger)).toBe(oldFence.toBigInt());
    await lock.commit({ $inc: { balance: 1 } });
    const released = await accounts.findOne({ _id: 'a' });
    expect(Object.keys(released?._lock as Document)).toEqual(RELEASED_FIELDS);
    expect(JSON.stringify(released)).not.toContain('old-token');
  });

  it('heals the lock field of an old holder whose lease ran out when another takes it over', async () => {
    const oldFence = Long.fromNumber(Date.now() - 60_000);
    await accounts.updateOne(
      { _id: 'a' },
      {
        $set: {
          _lock: {
            owner: 'old-owner',
            holder: 'old-host:1:abc',
            fence: oldFence,
            acquiredAt: new Date(Date.now() - 10_000),
            expiresAt: new Date(Date.now() - 1_000),
            releasedOwners: [{ owner: 'old-token', fence: oldFence, until: new Date() }],
          },
        },
      },
    );
    const client = await kit.client();
    const store = storeOf(client, kit.mongo.dbName, collectionName);
    const fence = await store.take('new');
    expect(Object.keys((await store.lock()) ?? {})).toEqual(HELD_FIELDS);
    expect(await store.release('new', fence)).toBe('released');
    expect(await store.release('new', fence)).toBe('released');
    expect(JSON.stringify(await store.lock())).not.toContain('old-');
  });
});

describeWithFailPoints('A release or commit tried again after MongoDB did not confirm it', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);
  let accounts: Collection<Account>;
  let collectionName: string;

  beforeEach(async () => {
    ({ accounts, collectionName } = await withOneAccount(kit));
  });

  /** Another service's document locks on the collection. */
  const otherDocs = async () => (await kit.service()).documents<Account>(collectionName);

  /** A holder whose next findAndModify is applied, and answered with a write concern error. */
  async function holderWithLostReply(appName: string) {
    const client = await appClient(appName);
    const docs = (await kit.service({ client })).documents<Account>(collectionName);
    const lock = await docs.acquire('a', { ttlMs: 20_000, renew: false });
    await failPoint({ times: 1 }, writeConcernTimeout(appName));
    return lock;
  }

  // What others do between the lost reply and the retry; a lock they still hold is released at the end.
  const meanwhiles: [string, (others: DocumentLocks<Account>) => Promise<LockHandle | void>][] = [
    ['nobody locked the document since', async () => undefined],
    ['another holds it now', (others) => others.acquire('a')],
    [
      'others locked and committed or released it since',
      async (others) => {
        for (let i = 0; i < 5; i += 1) {
          const lock = await others.acquire('a');
          await (i % 2 === 0 ? lock.commit({ $inc: { balance: 1 } }) : lock.release());
        }
      },
    ],
  ];

  it.each(meanwhiles)(
    'a release whose reply was lost is recognised when tried again: %s',
    async (_, meanwhile) => {
      const lock = await holderWithLostReply('lost-release');
      const first = await settleWithin(lock.release(), 5_000);
      expect(first.error).toBeInstanceOf(LockStoreUnavailableError);
      expect((await accounts.findOne({ _id: 'a' }))?._lock).toMatchObject({ owner: null });
      const stillHeld = await meanwhile(await otherDocs());
      const retried = await settleWithin(lock.release(), 5_000);
      expect(retried.error).toBeUndefined();
      expect(retried.status).toBe('resolved');
      expect(lock.lost).toBe(false);
      expect(lock.signal.aborted).toBe(false);
      await stillHeld?.release();
    },
  );

  it('a commit whose reply was lost: the release that follows it recognises the commit, and the lock ends released, not lost', async () => {
    const lock = await holderWithLostReply('lost-commit');
    const committing = await settleWithin(lock.commit({ $inc: { balance: 1 } }), 5_000);
    expect(committing.error).toBeInstanceOf(LockStoreUnavailableError);
    expect(await accounts.findOne({ _id: 'a' })).toMatchObject({
      balance: 101,
      _lock: { owner: null },
    });
    await eventually(() => lock.released, 5_000);
    expect(lock.lost).toBe(false);
    expect(lock.signal.aborted).toBe(false);
  });

  it('a release tried again after a later lease ran out and was taken over cannot tell, and says so', async () => {
    const lock = await holderWithLostReply('unknown-release');
    const first = await settleWithin(lock.release(), 5_000);
    expect(first.error).toBeInstanceOf(LockStoreUnavailableError);
    const client = await kit.client();
    await storeOf(client, kit.mongo.dbName, collectionName).take('ran-out', 150);
    await sleep(300);
    await (await (await otherDocs()).acquire('a')).release();
    const retried = await settleWithin(lock.release(), 5_000);
    expect(retried.error).toBeInstanceOf(LockLostError);
    expect((retried.error as LockLostError).message).toMatch(
      /an earlier release of its lock was not confirmed.*the outcome cannot be told, so the lock counts as lost/,
    );
    expect((retried.error as LockLostError).cause).toBeInstanceOf(LockLostError);
    expect(lock.lost).toBe(true);
  });
});
