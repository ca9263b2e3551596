// A document lock's writes cannot join a locked transaction (withLock with transaction: true):
// taken inside one, its commit landed at once, stayed after the transaction aborted, and was
// made again when the driver reran the work. Refused instead, before anything is written; so is
// updateIfCurrent, whose write landed outside the transaction the same way.
import type { Collection } from 'mongodb';
import type { DocumentLocks, DocumentLocksOptions } from '../../lib';
import { MongoLockError } from '../../lib/errors';
import { LockTestKit, settle } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

type Documents = DocumentLocks<Raw>;

interface Raw {
  _id: string;
  n: number;
  [field: string]: unknown;
}

describe('Document locks inside a locked transaction', () => {
  const kit = LockTestKit.forSuite();
  let seq = 0;
  let collectionName: string;
  let docs: Collection<Raw>;

  beforeEach(async () => {
    seq += 1;
    collectionName = `in_transaction_${seq}`;
    const client = await kit.client();
    docs = client.db(kit.mongo.dbName).collection<Raw>(collectionName);
    await docs.insertOne({ _id: 'd', n: 0 });
  });

  /** The service (on the data's client), its document locks, and a transactional run. */
  async function setUp(options?: DocumentLocksOptions<Raw>) {
    const service = await kit.service({ client: await kit.client() });
    const documents = service.documents<Raw>(collectionName, options);
    let runs = 0;
    const inTransaction = (work: () => Promise<unknown>) =>
      service.withLock(
        'outer',
        async () => {
          runs += 1;
          return work();
        },
        { transaction: true },
      );
    return { service, documents, inTransaction, runs: () => runs };
  }

  const refusal = /cannot be taken inside a locked transaction/;

  it.each<[string, (documents: Documents) => Promise<unknown>]>([
    ['withLock', (d: Documents) => d.withLock('d', (lock) => lock.commit({ $inc: { n: 1 } }))],
    ['acquire', (d: Documents) => d.acquire('d')],
    ['tryAcquire', (d: Documents) => d.tryAcquire('d')],
    [
      'acquire with createIfMissing',
      (d: Documents) => d.acquire('new', { createIfMissing: { n: 5 } }),
    ],
  ])('%s is refused with MongoLockError, nothing written', async (_label, lockDocument) => {
    const { documents, inTransaction, runs } = await setUp();
    const result = await settle(inTransaction(() => lockDocument(documents)));
    expect(result).toBeInstanceOf(MongoLockError);
    expect((result as Error).message).toMatch(refusal);
    expect(runs()).toBe(1);
    // No lock field, no commit, no created document.
    expect(await docs.find().toArray()).toEqual([{ _id: 'd', n: 0 }]);
  });

  it('a document lock held outside cannot be re-entered inside the transaction', async () => {
    const { documents, inTransaction } = await setUp();
    const result = await documents.withLock('d', () =>
      settle(
        inTransaction(() => documents.withLock('d', (lock) => lock.commit({ $inc: { n: 1 } }))),
      ),
    );
    expect(result).toBeInstanceOf(MongoLockError);
    expect((result as Error).message).toMatch(refusal);
    expect(await docs.findOne({ _id: 'd' }, { projection: { _lock: 0 } })).toEqual({
      _id: 'd',
      n: 0,
    });
  });

  it('a handle taken outside cannot update or commit inside the transaction', async () => {
    const { documents, inTransaction } = await setUp();
    const lock = await documents.acquire('d');
    try {
      for (const write of [() => lock.update({ $inc: { n: 1 } }), () => lock.commit()]) {
        const result = await settle(inTransaction(write));
        expect(result).toBeInstanceOf(MongoLockError);
        expect((result as Error).message).toMatch(
          /cannot (update|commit) inside a locked transaction/,
        );
      }
      // Still held and writable outside it.
      await lock.commit({ $inc: { n: 1 } });
    } finally {
      await lock.release();
    }
    expect(await docs.findOne({ _id: 'd' }, { projection: { _lock: 0 } })).toEqual({
      _id: 'd',
      n: 1,
    });
  });

  it('updateIfCurrent is refused with MongoLockError, nothing written; after it, it writes', async () => {
    await docs.updateOne({ _id: 'd' }, { $set: { v: 1 } });
    const { documents, inTransaction, runs } = await setUp({ version: { field: 'v' } });
    const result = await settle(
      inTransaction(() => documents.updateIfCurrent('d', 1, { $inc: { n: 1 } })),
    );
    expect(result).toBeInstanceOf(MongoLockError);
    expect((result as Error).message).toMatch(
      /^updateIfCurrent on "in_transaction_\d+" cannot run inside a locked transaction/,
    );
    expect(runs()).toBe(1);
    expect(await docs.findOne({ _id: 'd' })).toEqual({ _id: 'd', n: 0, v: 1 });
    expect(await documents.updateIfCurrent('d', 1, { $inc: { n: 1 } })).toEqual({
      _id: 'd',
      n: 1,
      v: 2,
    });
  });

  it('inspect writes nothing: it still answers inside the work', async () => {
    const { documents, inTransaction } = await setUp();
    const state = await inTransaction(() => documents.inspect('d'));
    expect(state).toMatchObject({ key: '"d"', held: false });
  });

  it('without a transaction, or after it, document locks work as before', async () => {
    const { service, documents, inTransaction } = await setUp();
    await service.withLock('outer', () =>
      documents.withLock('d', (lock) => lock.commit({ $inc: { n: 1 } })),
    );
    await inTransaction(async () => 'done');
    await documents.withLock('d', (lock) => lock.commit({ $inc: { n: 1 } }));
    expect(await docs.findOne({ _id: 'd' }, { projection: { _lock: 0 } })).toEqual({
      _id: 'd',
      n: 2,
    });
  });
});
