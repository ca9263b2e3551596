// A client with `useBigInt64` reads every int64 as a bigint: the `_id` of a document stored with
// an int64 id (`lock.doc._id` too) is one. The change-event side keys such a bigint as the number
// it is, and so does an id given as one: the document is locked by the id the application read,
// and re-entered with `lock.doc._id`.
import { Long, MongoClient } from 'mongodb';
import type { Document } from 'mongodb';
import { LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(30_000);

describe('a bigint document id (a useBigInt64 client)', () => {
  const kit = LockTestKit.forSuite();
  let client: MongoClient;
  afterAll(() => client?.close());

  it('locks, re-enters and creates by the bigint the client read', async () => {
    client = new MongoClient(kit.mongo.uri, { useBigInt64: true });
    await client.connect();
    const collection = client.db(kit.mongo.dbName).collection<Document>('review_bigint_ids');
    const big = 2n ** 60n + 1n;
    await collection.insertMany([
      { _id: Long.fromBigInt(5n) as never, n: 1 },
      { _id: Long.fromBigInt(big) as never, n: 1 },
    ]);
    const docs = (await kit.service({ client })).documents(collection.collectionName);

    const read = await collection.findOne({ _id: Long.fromBigInt(big) });
    expect(read?._id).toBe(big);
    const inner = await docs.withLock(read?._id, (outer) => {
      expect(outer.doc._id).toBe(big);
      // Re-entered with the id the lock handed out.
      return docs.withLock(outer.doc._id, (again) => again.commit({ $inc: { n: 1 } }));
    });
    expect(inner.n).toBe(2);

    const lock = await docs.acquire(2n ** 60n + 1n);
    // The same document as the Long of that value: held.
    expect(await docs.tryAcquire(Long.fromBigInt(big))).toBeNull();
    await lock.release();
    const small = await docs.acquire(5n);
    expect(small.doc.n).toBe(1);
    await small.release();

    const created = await docs.acquire(7n, { createIfMissing: { n: 0 } });
    expect(created.created).toBe(true);
    await created.commit({ $inc: { n: 1 } });
    expect((await collection.findOne({ _id: 7n as never }))?.n).toBe(1);

    // Past 64 bits no int64 holds it: still refused.
    await expect(docs.acquire(2n ** 64n)).rejects.toThrow(/usable _id|int64|64/);
  });
});
