import type { ClientSession, Collection } from 'mongodb';
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
