import { MongoBulkWriteError, MongoServerError } from 'mongodb';
import { openStream, useOfflineMongo } from './with-offline-mongo';

describe('offline mongo: indexes', () => {
  const harness = useOfflineMongo();
  const collection = (name: string) => harness().client.db('idx').collection<any>(name);

  it('creates, lists and drops indexes; identical createIndexes is a no-op', async () => {
    const items = collection('basic');
    expect(await items.createIndex({ a: 1, b: -1 }, { unique: true })).toBe('a_1_b_-1');
    const again = await harness()
      .client.db('idx')
      .command({
        createIndexes: 'basic',
        indexes: [{ key: { a: 1, b: -1 }, name: 'a_1_b_-1', unique: true }],
      });
    expect(again).toMatchObject({
      numIndexesBefore: 2,
      numIndexesAfter: 2,
      note: 'all indexes already exist',
    });
    expect((await items.indexes()).map((index) => index.name)).toEqual(['_id_', 'a_1_b_-1']);
    await items.dropIndex('a_1_b_-1');
    expect((await items.indexes()).map((index) => index.name)).toEqual(['_id_']);
    await expect(items.dropIndex('nope')).rejects.toMatchObject({
      code: 27,
      codeName: 'IndexNotFound',
    });
  });

  it('rejects conflicting index definitions with 85 and 86', async () => {
    const items = collection('conflicts');
    await items.createIndex({ a: 1 }, { name: 'a_1' });
    await expect(items.createIndex({ a: -1 }, { name: 'a_1' })).rejects.toMatchObject({
      code: 86,
      codeName: 'IndexKeySpecsConflict',
    });
    await expect(items.createIndex({ a: 1 }, { name: 'a_1', unique: true })).rejects.toMatchObject({
      code: 85,
      codeName: 'IndexOptionsConflict',
    });
    await expect(items.createIndex({ a: 1 }, { name: 'other' })).rejects.toMatchObject({
      code: 85,
    });
  });

  it('enforces unique indexes on insert with MongoDB error shape', async () => {
    const items = collection('uniqueInsert');
    await items.createIndex({ email: 1 }, { unique: true });
    await items.insertOne({ _id: 1, email: 'a@x' });
    const error = await items
      .insertMany([
        { _id: 2, email: 'b@x' },
        { _id: 3, email: 'a@x' },
      ])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MongoBulkWriteError);
    const writeError = (error as MongoBulkWriteError).writeErrors as any;
    const first = Array.isArray(writeError) ? writeError[0] : writeError;
    expect(first.index).toBe(1);
    expect(first.code).toBe(11000);
    expect(first.errmsg).toBe(
      'E11000 duplicate key error collection: idx.uniqueInsert index: email_1 dup key: { email: "a@x" }',
    );
    // The bulk API drops keyPattern/keyValue; the raw reply carries them.
    const raw = await harness()
      .client.db('idx')
      .command({ insert: 'uniqueInsert', documents: [{ _id: 9, email: 'a@x' }] });
    expect(raw.writeErrors).toEqual([
      {
        index: 0,
        code: 11000,
        keyPattern: { email: 1 },
        keyValue: { email: 'a@x' },
        errmsg:
          'E11000 duplicate key error collection: idx.uniqueInsert index: email_1 dup key: { email: "a@x" }',
      },
    ]);
    expect(await items.countDocuments()).toBe(2);
    const dupId = await items.insertOne({ _id: 1 }).catch((e: unknown) => e);
    expect(dupId).toMatchObject({ code: 11000, keyPattern: { _id: 1 }, keyValue: { _id: 1 } });
  });

  it('reports DuplicateKey from findAndModify as a top-level error', async () => {
    const items = collection('uniqueFam');
    await items.createIndex({ k: 1 }, { unique: true });
    await items.insertMany([
      { _id: 1, k: 1 },
      { _id: 2, k: 2 },
    ]);
    const error = await items
      .findOneAndUpdate({ _id: 2 }, { $set: { k: 1 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MongoServerError);
    expect(error).toMatchObject({
      code: 11000,
      codeName: 'DuplicateKey',
      keyPattern: { k: 1 },
      keyValue: { k: 1 },
    });
    const upsert = await items
      .updateOne({ _id: 3 }, { $set: { k: 2 } }, { upsert: true })
      .catch((e: unknown) => e);
    expect(upsert).toMatchObject({ code: 11000 });
  });

  it('honours partialFilterExpression and sparse', async () => {
    const items = collection('partial');
    await items.createIndex(
      { owner: 1 },
      { unique: true, partialFilterExpression: { active: true } },
    );
    await items.insertMany([
      { owner: 'a', active: false },
      { owner: 'a', active: false },
      { owner: 'a', active: true },
    ]);
    await expect(items.insertOne({ owner: 'a', active: true })).rejects.toMatchObject({
      code: 11000,
    });
    const sparse = collection('sparse');
    await sparse.createIndex({ s: 1 }, { unique: true, sparse: true });
    await sparse.insertMany([{}, {}, { s: 1 }]);
    await expect(sparse.insertOne({ s: 1 })).rejects.toMatchObject({ code: 11000 });
  });

  it('treats a missing field as null in a non-sparse unique index', async () => {
    const items = collection('nulls');
    await items.createIndex({ n: 1 }, { unique: true });
    await items.insertOne({ _id: 1 });
    await expect(items.insertOne({ _id: 2 })).rejects.toMatchObject({
      code: 11000,
      keyValue: { n: null },
    });
  });
});

describe('offline mongo: TTL monitor', () => {
  const harness = useOfflineMongo({ ttlMonitorSleepSecs: 1 });

  it('deletes expired documents (earliest date of an array) as ordinary deletes', async () => {
    const sessions = harness().client.db('ttl').collection<any>('sessions');
    await sessions.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    const past = new Date(Date.now() - 1000);
    const future = new Date(Date.now() + 3_600_000);
    const stream = sessions.watch<any, any>([{ $match: { operationType: 'delete' } }]);
    const { next } = await openStream(harness().client, stream);
    await sessions.insertMany([
      { _id: 'old', at: past },
      { _id: 'mixed', at: [future, past] },
      { _id: 'new', at: future },
      { _id: 'none', at: 'not a date' },
    ]);
    const deleted: unknown[] = [
      (await next).documentKey._id,
      (await stream.next()).documentKey._id,
    ];
    expect(deleted.sort()).toEqual(['mixed', 'old']);
    expect((await sessions.find().toArray()).map((d) => d._id).sort()).toEqual(['new', 'none']);
    await stream.close();
  }, 15_000);

  it('expires only the documents a partial TTL index covers, and follows collMod', async () => {
    const db = harness().client.db('ttl');
    const items = db.collection<any>('partialTtl');
    await items.createIndex(
      { at: 1 },
      { expireAfterSeconds: 3600, partialFilterExpression: { kind: 'temp' } },
    );
    const past = new Date(Date.now() - 1000);
    await items.insertMany([
      { _id: 'temp', kind: 'temp', at: past },
      { _id: 'keep', kind: 'keep', at: past },
    ]);
    const stream = items.watch<any, any>();
    const { next } = await openStream(harness().client, stream);
    const changed = await db.command({
      collMod: 'partialTtl',
      index: { keyPattern: { at: 1 }, expireAfterSeconds: 0 },
    });
    expect(changed).toMatchObject({ expireAfterSeconds_old: 3600, expireAfterSeconds_new: 0 });
    expect((await next).documentKey).toEqual({ _id: 'temp' });
    expect((await items.find().toArray()).map((d) => d._id)).toEqual(['keep']);
    await stream.close();
  }, 15_000);

  it('exposes ttlMonitorSleepSecs through getParameter / setParameter', async () => {
    const admin = harness().client.db('admin');
    expect(await admin.command({ getParameter: 1, ttlMonitorSleepSecs: 1 })).toMatchObject({
      ttlMonitorSleepSecs: 1,
    });
    expect(await admin.command({ setParameter: 1, ttlMonitorSleepSecs: 2 })).toMatchObject({
      was: 1,
    });
    expect(await admin.command({ getParameter: 1, ttlMonitorSleepSecs: 1 })).toMatchObject({
      ttlMonitorSleepSecs: 2,
    });
  });
});
