import { type ClientSession, type Collection, MongoClient } from 'mongodb';
import { useOfflineMongo } from './with-offline-mongo';

// As a mongod does: a write outside a transaction to a document that an open transaction has
// written waits until that transaction commits or aborts, then runs; the transaction is not
// harmed. A transaction open longer than `transactionLifetimeLimitSeconds` is aborted.

/** Settles with what `write` gave, and says whether it had settled by the time it is asked. */
function track<T>(write: Promise<T>): { done: () => boolean; result: Promise<T> } {
  let settled = false;
  const result = write.finally(() => (settled = true));
  result.catch(() => undefined);
  return { done: () => settled, result };
}

/** A pause long enough for a write that would not wait to have been answered many times. */
const pause = () => new Promise((resolve) => setTimeout(resolve, 150));

describe('offline mongo: plain writes wait for open transactions', () => {
  const harness = useOfflineMongo();
  const client = () => harness().client;
  const admin = () => client().db('admin');
  let items: Collection<any>;
  let session: ClientSession;

  beforeEach(async () => {
    items = client()
      .db('waits')
      .collection(`items${Math.random().toString(36).slice(2)}`);
    await items.insertMany([
      { _id: 1, n: 0 },
      { _id: 2, n: 0 },
    ]);
    session = client().startSession();
    session.startTransaction();
    await items.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { session });
  });

  afterEach(async () => {
    await session.abortTransaction().catch(() => undefined);
    await session.endSession();
  });

  it('runs an update after the transaction commits, on what it committed', async () => {
    const write = track(items.updateOne({ _id: 1 }, { $inc: { n: 10 } }));
    await pause();
    expect(write.done()).toBe(false);
    await session.commitTransaction();
    expect(await write.result).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await items.findOne({ _id: 1 })).toEqual({ _id: 1, n: 11 });
  });

  it('runs a findOneAndUpdate after the transaction aborts, on the document as it was', async () => {
    const write = track(
      items.findOneAndUpdate({ _id: 1 }, { $inc: { n: 10 } }, { returnDocument: 'after' }),
    );
    await pause();
    expect(write.done()).toBe(false);
    await session.abortTransaction();
    expect(await write.result).toEqual({ _id: 1, n: 10 });
  });

  it('makes a delete and an insert of the same _id wait', async () => {
    const removal = track(items.deleteOne({ _id: 1 }));
    await items.insertOne({ _id: 3 }, { session });
    const insert = track(items.insertOne({ _id: 3 }));
    await pause();
    expect([removal.done(), insert.done()]).toEqual([false, false]);
    await session.commitTransaction();
    expect(await removal.result).toMatchObject({ deletedCount: 1 });
    await expect(insert.result).rejects.toMatchObject({ code: 11000 });
  });

  it('lets a multi-document update write nothing until the transaction ends', async () => {
    // The transaction's document comes after one it did not write.
    await session.abortTransaction();
    session.startTransaction();
    await items.updateOne({ _id: 2 }, { $inc: { n: 1 } }, { session });
    const write = track(items.updateMany({}, { $inc: { n: 100 } }));
    await pause();
    expect(write.done()).toBe(false);
    // Document 1, which no transaction wrote, is not written ahead of the wait.
    expect(await items.findOne({ _id: 1 })).toEqual({ _id: 1, n: 0 });
    await session.commitTransaction();
    expect(await write.result).toMatchObject({ matchedCount: 2, modifiedCount: 2 });
    expect(await items.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 1, n: 100 },
      { _id: 2, n: 101 },
    ]);
  });

  it('ends the wait at the command maxTimeMS with MaxTimeMSExpired', async () => {
    const error = await items
      .updateOne({ _id: 1 }, { $inc: { n: 10 } }, { maxTimeMS: 200 })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 50, codeName: 'MaxTimeMSExpired' });
    await session.commitTransaction();
    expect(await items.findOne({ _id: 1 })).toEqual({ _id: 1, n: 1 });
  });

  it('does not wait for a transaction that wrote other documents', async () => {
    expect(await items.updateOne({ _id: 2 }, { $inc: { n: 5 } })).toMatchObject({
      modifiedCount: 1,
    });
    await session.commitTransaction();
  });

  it('makes a $merge wait before its first write', async () => {
    // The transaction's document comes after one it did not write.
    await session.abortTransaction();
    session.startTransaction();
    await items.updateOne({ _id: 2 }, { $inc: { n: 1 } }, { session });
    const merge = track(
      items
        .aggregate([{ $set: { merged: true } }, { $merge: { into: items.collectionName } }])
        .toArray(),
    );
    await pause();
    expect(merge.done()).toBe(false);
    expect(await items.findOne({ _id: 1 })).toEqual({ _id: 1, n: 0 });
    await session.commitTransaction();
    await merge.result;
    expect(await items.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 1, n: 0, merged: true },
      { _id: 2, n: 0, merged: true },
    ]);
  });

  it('applies a retryable write once when the driver retries it during the wait', async () => {
    // Its socket times out while the first try waits: the retry, same txnNumber, waits for
    // the first try (one operation per session at a time) and gets its reply.
    const impatient = await MongoClient.connect(harness().mongo.uri, { socketTimeoutMS: 300 });
    try {
      const write = track(
        impatient
          .db('waits')
          .collection<any>(items.collectionName)
          .updateOne({ _id: 1 }, { $inc: { n: 10 } }),
      );
      await new Promise((resolve) => setTimeout(resolve, 800));
      await session.commitTransaction();
      await write.result.catch(() => undefined);
      await pause();
      expect(await items.findOne({ _id: 1 })).toEqual({ _id: 1, n: 11 });
    } finally {
      await impatient.close();
    }
  });

  it('writes into the collection as it is after the wait, not as it was', async () => {
    const insert = track(
      items.insertMany([{ _id: 5 }, { _id: 1 }, { _id: 6 }], { ordered: false }),
    );
    await pause();
    expect(insert.done()).toBe(false);
    await items.drop();
    await session.abortTransaction();
    await insert.result.catch(() => undefined);
    // _id 5 went before the drop; 1 and 6 after it, into the collection made again.
    expect(await items.find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 1 }, { _id: 6 }]);
  });

  it('ends a transaction whose commit fails partway, so that no write waits for it', async () => {
    await items.createIndex({ k: 1 }, { unique: true, sparse: true });
    await items.insertOne({ _id: 3, k: 'taken-later' }, { session });
    // Outside the transaction, the unique key its insert needs (only _ids are locked here).
    await items.insertOne({ _id: 4, k: 'taken-later' });
    await expect(session.commitTransaction()).rejects.toMatchObject({ code: 11000 });
    const write = items.updateOne({ _id: 1 }, { $inc: { n: 10 } }, { maxTimeMS: 1_000 });
    await expect(write).resolves.toMatchObject({ modifiedCount: 1 });
  });

  it('refuses a transactionLifetimeLimitSeconds below 1, and takes one past a timer’s range', async () => {
    await expect(
      admin().command({ setParameter: 1, transactionLifetimeLimitSeconds: 0 }),
    ).rejects.toMatchObject({ code: 2 });
    await session.abortTransaction();
    await admin().command({ setParameter: 1, transactionLifetimeLimitSeconds: 3_000_000 });
    try {
      session.startTransaction();
      await items.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { session });
      await pause();
      await session.commitTransaction();
    } finally {
      await admin().command({ setParameter: 1, transactionLifetimeLimitSeconds: 60 });
    }
  });

  it('aborts a transaction open past transactionLifetimeLimitSeconds, and the wait ends', async () => {
    await session.abortTransaction();
    // As on a mongod, the limit a transaction gets is the one set when it starts.
    await admin().command({ setParameter: 1, transactionLifetimeLimitSeconds: 1 });
    try {
      session.startTransaction();
      await items.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { session });
      const write = track(items.updateOne({ _id: 1 }, { $inc: { n: 10 } }));
      await pause();
      expect(write.done()).toBe(false);
      await write.result;
      expect(await items.findOne({ _id: 1 })).toEqual({ _id: 1, n: 10 });
      await expect(session.commitTransaction()).rejects.toMatchObject({ code: 251 });
    } finally {
      await admin().command({ setParameter: 1, transactionLifetimeLimitSeconds: 60 });
    }
  });
});

describe('offline mongo: waits end at a step-down, and the TTL monitor passes busy documents by', () => {
  const harness = useOfflineMongo({ ttlMonitorSleepSecs: 1 });
  const client = () => harness().client;

  it('skips an expired document an open transaction wrote, and deletes the rest', async () => {
    const items = client().db('waits').collection<any>('expiring');
    await items.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    const past = new Date(Date.now() - 60_000);
    // The document the transaction writes comes first in the monitor's pass.
    await items.insertMany([
      { _id: 1, at: past },
      { _id: 2, at: past },
    ]);
    const session = client().startSession();
    session.startTransaction();
    await items.updateOne({ _id: 1 }, { $set: { seen: true } }, { session });
    for (let i = 0; i < 40 && (await items.countDocuments({ _id: 2 })) > 0; i++) await pause();
    expect(await items.find().toArray()).toEqual([{ _id: 1, at: past }]);
    await session.abortTransaction();
    for (let i = 0; i < 40 && (await items.countDocuments()) > 0; i++) await pause();
    expect(await items.countDocuments()).toBe(0);
    await session.endSession();
  });

  it('interrupts a waiting write when the node steps down', async () => {
    const items = client().db('waits').collection<any>('stepDown');
    await items.insertMany([{ _id: 1 }, { _id: 2 }]);
    const session = client().startSession();
    session.startTransaction();
    await items.updateOne({ _id: 1 }, { $set: { seen: true } }, { session });
    // A multi-document update is not a retryable write: the driver passes its error on.
    const write = track(items.updateMany({}, { $set: { late: true } }));
    await pause();
    await client().db('admin').command({ replSetStepDown: 1 });
    await expect(write.result).rejects.toMatchObject({ code: 11602 });
    expect(await items.countDocuments({ late: true })).toBe(0);
    await session.endSession();
  });
});
