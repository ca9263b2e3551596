// A write whose update, or the document after it, would exceed MongoDB's 16 MB BSON limit is
// refused whole: by the library before anything is sent (the update itself is too large; the
// driver would fail deep in its serializer), or by MongoDB (the document after the update is
// too large: code 17419, or 10334 BSONObjectTooLarge on newer servers). Nothing is written. A
// handle's `update` keeps the lock; a `commit` MongoDB refuses ends it, as any refused commit
// does (the document unchanged and unlocked). The error is an `InvalidLockOptionsError` on the
// option `update`.
import type { CommandStartedEvent, Document } from 'mongodb';
import { InvalidLockOptionsError, MongoLockError } from '../../lib/errors';
import { eventually, LockTestKit } from '../lock-service/lock-test-kit';
import { withOneAccount } from './account-fixture';

jest.setTimeout(60_000);

const MB = 1024 * 1024;
/** Half the limit and more: two of them make a document over 16 MB. */
const nineMegabytes = 'y'.repeat(9 * MB);
/** An update over the limit by itself. */
const seventeenMegabytes = 'x'.repeat(17 * MB);
const TOO_LARGE = /update is too large.*16 MB \(16777216 bytes\)/;

function expectTooLarge(error: unknown): void {
  expect(error).toBeInstanceOf(InvalidLockOptionsError);
  expect(error).toBeInstanceOf(MongoLockError);
  expect((error as InvalidLockOptionsError).option).toBe('update');
  expect((error as Error).message).toMatch(TOO_LARGE);
}

describe('document writes too large for MongoDB', () => {
  const kit = LockTestKit.forSuite();

  /** The account, grown to 9 MB: an update adding 9 MB more makes it too large. */
  async function bigAccount(version?: boolean) {
    const { accounts, collectionName } = await withOneAccount(kit);
    await accounts.updateOne(
      { _id: 'a' },
      { $set: { first: nineMegabytes, ...(version && { version: 1 }) } },
    );
    const service = await kit.service();
    const docs = service.documents<Document>(
      collectionName,
      version ? { version: { field: 'version' } } : undefined,
    );
    const stored = async () =>
      accounts.findOne({ _id: 'a' }, { projection: { first: 0, _lock: 0 } });
    return { docs, stored, collectionName };
  }

  it.each([
    ['the document after it would be too large (MongoDB refuses it)', { second: nineMegabytes }],
    ['the update itself is too large (refused before it is sent)', { second: seventeenMegabytes }],
  ])(
    'a commit refused because %s writes nothing and ends the lock, the document unlocked',
    async (_, fields) => {
      const { docs, stored, collectionName } = await bigAccount();
      const lock = await docs.acquire('a', { ttlMs: 5_000, renew: true });
      const refused = await lock.commit({ $set: fields, $inc: { balance: 1 } }).catch((e) => e);
      expectTooLarge(refused);
      await eventually(() => lock.released, 5_000);
      expect(lock.lost).toBe(false);
      expect(await stored()).toEqual({ _id: 'a', balance: 100 });
      // Free at once for another service, long before the lease would have ended.
      const other = (await kit.service()).documents<Document>(collectionName);
      const next = await other.tryAcquire('a');
      expect(next).not.toBeNull();
      await next!.release();
      await expect(lock.commit({ $inc: { balance: 1 } })).rejects.toBeInstanceOf(MongoLockError);
    },
  );

  it('the update itself too large is not sent to MongoDB', async () => {
    const { collectionName } = await withOneAccount(kit);
    const client = await kit.client({ monitorCommands: true });
    const sent: string[] = [];
    client.on('commandStarted', ({ commandName }: CommandStartedEvent) => sent.push(commandName));
    const docs = (await kit.service({ client })).documents<Document>(collectionName);
    const lock = await docs.acquire('a');
    sent.length = 0;
    expectTooLarge(await lock.update({ $set: { big: seventeenMegabytes } }).catch((e) => e));
    expectTooLarge(await lock.commit({ $set: { big: seventeenMegabytes } }).catch((e) => e));
    expect(sent).not.toContain('findAndModify');
    await eventually(() => lock.released, 5_000);
  });

  it('a refused commit inside withLock rejects the call and leaves the document unlocked', async () => {
    const { docs, stored } = await bigAccount();
    const error = await docs
      .withLock('a', (lock) => lock.commit({ $set: { second: nineMegabytes } }))
      .catch((e) => e);
    expectTooLarge(error);
    expect((await docs.inspect('a'))?.held).toBe(false);
    expect(await stored()).toEqual({ _id: 'a', balance: 100 });
  });

  it('a release asked while a commit is refused answers with its error and ends the lock', async () => {
    const { docs } = await bigAccount();
    const lock = await docs.acquire('a');
    const committing = lock.commit({ $set: { second: nineMegabytes } });
    const releasing = lock.release();
    expectTooLarge(await committing.catch((e) => e));
    expectTooLarge(await releasing.catch((e) => e));
    await eventually(() => lock.released, 5_000);
    expect((await docs.inspect('a'))?.held).toBe(false);
  });

  it("a handle's update refused as too large keeps the lock; a smaller update lands", async () => {
    const { docs, stored } = await bigAccount();
    const lock = await docs.acquire('a');
    expectTooLarge(await lock.update({ $set: { second: nineMegabytes } }).catch((e) => e));
    expect(lock.lost).toBe(false);
    expect(await stored()).toEqual({ _id: 'a', balance: 100 });
    expect(await lock.update({ $inc: { balance: 5 } })).toMatchObject({ balance: 105 });
    await lock.release();
  });

  it('updateIfCurrent refused as too large writes nothing and leaves the version', async () => {
    const { docs, stored } = await bigAccount(true);
    expectTooLarge(
      await docs.updateIfCurrent('a', 1, { $set: { second: nineMegabytes } }).catch((e) => e),
    );
    expectTooLarge(
      await docs.updateIfCurrent('a', 1, { $set: { second: seventeenMegabytes } }).catch((e) => e),
    );
    expect(await stored()).toEqual({ _id: 'a', balance: 100, version: 1 });
    expect(await docs.updateIfCurrent('a', 1, { $inc: { balance: 1 } })).toMatchObject({
      balance: 101,
      version: 2,
    });
  });
});
