import { MongoServerError } from 'mongodb';
import { useOfflineMongo } from './with-offline-mongo';

describe('offline mongo: transactions and retryable writes', () => {
  const harness = useOfflineMongo();
  const client = () => harness().client;
  const collection = (name: string) => client().db('sessions').collection<any>(name);

  it('keeps transaction writes invisible until commit', async () => {
    const items = collection('txn');
    await items.insertOne({ _id: 0 });
    const session = client().startSession();
    session.startTransaction();
    await items.insertOne({ _id: 1 }, { session });
    await items.updateOne({ _id: 0 }, { $set: { seen: true } }, { session });
    expect(await items.countDocuments({}, { session })).toBe(2);
    expect(await items.find().toArray()).toEqual([{ _id: 0 }]);
    await session.commitTransaction();
    expect(await items.find().toArray()).toEqual([{ _id: 0, seen: true }, { _id: 1 }]);
    await session.endSession();
  });

  it('reads one snapshot, taken at its first statement, across collections', async () => {
    const first = collection('snapshotA');
    const second = collection('snapshotB');
    await second.insertOne({ _id: 'old', v: 1 });
    const session = client().startSession();
    session.startTransaction();
    expect(await first.countDocuments({}, { session })).toBe(0); // the snapshot starts here
    await second.insertOne({ _id: 'new' });
    await second.updateOne({ _id: 'old' }, { $set: { v: 2 } });
    expect(await second.find({}, { session }).toArray()).toEqual([{ _id: 'old', v: 1 }]);
    // Writing a document changed since the snapshot is a write conflict.
    await expect(
      second.updateOne({ _id: 'old' }, { $set: { v: 3 } }, { session }),
    ).rejects.toMatchObject({ code: 112 });
    await session.abortTransaction().catch(() => undefined);
    await session.endSession();
  });

  it('discards writes on abort', async () => {
    const items = collection('aborted');
    const session = client().startSession();
    session.startTransaction();
    await items.insertOne({ _id: 1 }, { session });
    await session.abortTransaction();
    expect(await items.countDocuments()).toBe(0);
    await session.endSession();
  });

  it('gives the second transaction touching a document a WriteConflict', async () => {
    const items = collection('conflict');
    await items.insertOne({ _id: 1, n: 0 });
    const first = client().startSession();
    const second = client().startSession();
    first.startTransaction();
    second.startTransaction();
    await items.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { session: first });
    const error = await items
      .updateOne({ _id: 1 }, { $inc: { n: 10 } }, { session: second })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MongoServerError);
    expect(error).toMatchObject({ code: 112, codeName: 'WriteConflict' });
    expect((error as MongoServerError).hasErrorLabel('TransientTransactionError')).toBe(true);
    await first.commitTransaction();
    await second.abortTransaction().catch(() => undefined);
    expect(await items.findOne({ _id: 1 })).toEqual({ _id: 1, n: 1 });
    await first.endSession();
    await second.endSession();
  });

  it('labels a failing transaction statement TransientTransactionError', async () => {
    await client()
      .db('admin')
      .command({
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['insert'], errorCode: 10107 },
      });
    const session = client().startSession();
    session.startTransaction();
    const error = await collection('transient')
      .insertOne({ _id: 1 }, { session })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 10107 });
    expect((error as MongoServerError).hasErrorLabel('TransientTransactionError')).toBe(true);
    await session.abortTransaction().catch(() => undefined);
    await session.endSession();
  });

  it.each(['available', 'linearizable'] as const)(
    'refuses a transaction started with read concern %s, as MongoDB does (InvalidOptions)',
    async (level) => {
      const items = collection(`refusedReadConcern_${level}`);
      const session = client().startSession();
      session.startTransaction({ readConcern: { level } });
      const error = await items.insertOne({ _id: 1 }, { session }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(MongoServerError);
      expect(error).toMatchObject({
        code: 72,
        codeName: 'InvalidOptions',
        message:
          "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction",
      });
      expect((error as MongoServerError).hasErrorLabel('TransientTransactionError')).toBe(false);
      // It never started (MongoDB's jstests/core/txns/read_concerns.js: its abort is
      // NoSuchTransaction).
      await expect(items.insertOne({ _id: 2 }, { session })).rejects.toMatchObject({ code: 251 });
      await session.abortTransaction().catch(() => undefined);
      await session.endSession();
      expect(await items.countDocuments()).toBe(0);
    },
  );

  it.each(['local', 'majority', 'snapshot'] as const)(
    'runs a transaction started with read concern %s',
    async (level) => {
      const items = collection(`allowedReadConcern_${level}`);
      const session = client().startSession();
      session.startTransaction({ readConcern: { level } });
      await items.insertOne({ _id: 1 }, { session });
      await session.commitTransaction();
      await session.endSession();
      expect(await items.countDocuments()).toBe(1);
    },
  );

  it('runs withTransaction callbacks that commit', async () => {
    const items = collection('withTxn');
    const session = client().startSession();
    await session.withTransaction(async () => {
      await items.insertOne({ _id: 'a' }, { session });
      await items.insertOne({ _id: 'b' }, { session });
    });
    expect(await items.countDocuments()).toBe(2);
    await session.endSession();
  });

  it('applies a retried write once and returns the first result (closeConnection after commit)', async () => {
    const items = collection('retry');
    await items.insertOne({ _id: 1, x: 11 });
    await client()
      .db('admin')
      .command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: { times: 1 } });
    const before = await items.findOneAndUpdate(
      { _id: 1 },
      { $inc: { x: 1 } },
      { returnDocument: 'before' },
    );
    expect(before).toEqual({ _id: 1, x: 11 });
    expect(await items.findOne({ _id: 1 })).toEqual({ _id: 1, x: 12 });
  });

  it('retries a write after a failCommand error labelled RetryableWriteError', async () => {
    const items = collection('retryError');
    await client()
      .db('admin')
      .command({
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['insert'], errorCode: 189 },
      });
    await items.insertMany([{ _id: 3 }, { _id: 4 }]);
    expect(await items.countDocuments()).toBe(2);
  });

  it('fails a command with failCommand errorCode and errorLabels, then turns off', async () => {
    await client()
      .db('admin')
      .command({
        configureFailPoint: 'failCommand',
        mode: 'alwaysOn',
        data: { failCommands: ['find'], errorCode: 2, errorLabels: ['Custom'] },
      });
    const error = await collection('fp')
      .findOne({})
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 2, codeName: 'BadValue' });
    expect((error as MongoServerError).hasErrorLabel('Custom')).toBe(true);
    await client().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    expect(await collection('fp').findOne({})).toBeNull();
  });

  it('honours skip, appName and blockConnection', async () => {
    await client()
      .db('admin')
      .command({
        configureFailPoint: 'failCommand',
        mode: { skip: 1 },
        data: { failCommands: ['count'], errorCode: 91 },
      });
    expect(await collection('skip').countDocuments()).toBe(0); // aggregate, not count: untouched
    await client().db('sessions').command({ count: 'skip' });
    await expect(client().db('sessions').command({ count: 'skip' })).rejects.toMatchObject({
      code: 91,
    });
    await client().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await client()
      .db('admin')
      .command({
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['ping'], errorCode: 2, appName: 'someone-else' },
      });
    await client().db('admin').command({ ping: 1 }); // other appName: not failed
    await client().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await client()
      .db('admin')
      .command({
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 200 },
      });
    const started = Date.now();
    await client().db('admin').command({ ping: 1 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
  });

  it('fixes $$NOW when a command blocked by blockConnection runs, not when it arrived', async () => {
    const items = collection('blockedNow');
    await items.insertOne({ _id: 1 });
    await client()
      .db('admin')
      .command({
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['findAndModify'], blockConnection: true, blockTimeMS: 300 },
      });
    const sentAt = Date.now();
    const after = await items.findOneAndUpdate({ _id: 1 }, [{ $set: { at: '$$NOW' } }], {
      returnDocument: 'after',
      projection: { at: 1, now: '$$NOW' },
    });
    // Both the write and the reply's projection see the time the command ran.
    expect((after?.at as Date).getTime()).toBeGreaterThanOrEqual(sentAt + 290);
    expect((after?.now as Date).getTime()).toBe((after?.at as Date).getTime());
  });

  it('answers configureFailPoint with the times the fail point has fired so far', async () => {
    const configure = async (mode: unknown, data: object = {}) =>
      (await client().db('admin').command({ configureFailPoint: 'failCommand', mode, data }))
        .count as number;
    const count = () => client().db('sessions').command({ count: 'fired' });
    const failing = { failCommands: ['count'], errorCode: 91 };
    const before = await configure({ times: 2 }, failing);
    await expect(count()).rejects.toMatchObject({ code: 91 });
    await expect(count()).rejects.toMatchObject({ code: 91 });
    await count(); // the two times are spent
    // Counted across configurations; a command it does not aim at is not counted.
    expect(await configure('alwaysOn', { ...failing, appName: 'someone-else' })).toBe(before + 2);
    await count();
    expect(await configure({ skip: 1 }, failing)).toBe(before + 2);
    await count(); // skipped: not counted
    await expect(count()).rejects.toMatchObject({ code: 91 });
    expect(await configure('off')).toBe(before + 3);
  });

  it('waits in waitForFailPoint until the fail point has fired that many times', async () => {
    const admin = client().db('admin');
    const count = () => client().db('sessions').command({ count: 'waited' });
    const { count: before } = await admin.command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['count'], errorCode: 91 },
    });
    const waitFor = (maxTimeMS: number) =>
      admin.command({ waitForFailPoint: 'failCommand', timesEntered: before + 1, maxTimeMS });
    await expect(waitFor(100)).rejects.toMatchObject({ code: 50 });
    const waiting = waitFor(2 ** 32); // beyond Node's timer range: it waits, not fails at once
    await expect(count()).rejects.toMatchObject({ code: 91 });
    await expect(waiting).resolves.toMatchObject({ ok: 1 });
    await expect(waitFor(100)).resolves.toMatchObject({ ok: 1 }); // already reached
  });

  it('adds a writeConcernError to a write that still applies', async () => {
    await client()
      .db('admin')
      .command({
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['insert'], writeConcernError: { code: 100, errmsg: 'wc' } },
      });
    const error = await collection('wce')
      .insertOne({ _id: 1 })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 100 });
    expect(await collection('wce').countDocuments()).toBe(1);
  });
});
