import { MongoServerError, ObjectId } from 'mongodb';
import { useOfflineMongo } from './with-offline-mongo';

describe('offline mongo: CRUD over the driver', () => {
  const harness = useOfflineMongo();
  const collection = (name: string) => harness().client.db('crud').collection<any>(name);

  it('inserts and finds with filter, sort, skip, limit and projection', async () => {
    const items = collection('items');
    await items.insertMany([
      { _id: 1, a: 3 },
      { _id: 2, a: 1 },
      { _id: 3, a: 2 },
      { _id: 4, a: 5 },
    ]);
    const found = await items
      .find(
        { a: { $gte: 2 } },
        {
          sort: { a: -1 },
          skip: 1,
          limit: 2,
          projection: { _id: 0, a: 1, twice: { $multiply: ['$a', 2] } },
        },
      )
      .toArray();
    expect(found).toEqual([
      { a: 3, twice: 6 },
      { a: 2, twice: 4 },
    ]);
  });

  it('orders projected fields like MongoDB: kept in document order, computed in projection order', async () => {
    const docs = collection('projectionOrder');
    await docs.insertOne({ _id: 1, b: 1, a: 2 });
    const found = await docs.findOne(
      { _id: 1 },
      { projection: { z: { $literal: 1 }, a: 1, y: { $literal: 2 }, b: 1 } },
    );
    expect(Object.keys(found ?? {})).toEqual(['_id', 'b', 'a', 'z', 'y']);
  });

  it('iterates a cursor over several batches with getMore', async () => {
    const many = collection('many');
    await many.insertMany(Array.from({ length: 25 }, (_, i) => ({ i })));
    const all = await many.find({}, { batchSize: 4 }).toArray();
    expect(all.map((d) => d.i)).toEqual(Array.from({ length: 25 }, (_, i) => i));
  });

  it('batches like MongoDB: 101 documents first, and no reply over 16 MB', async () => {
    const db = harness().client.db('crud');
    await db.collection<any>('batches').insertMany(Array.from({ length: 150 }, (_, i) => ({ i })));
    const raw = await db.command({ find: 'batches' });
    expect(raw.cursor.firstBatch).toHaveLength(101);
    const big = db.collection<any>('big');
    const payload = 'x'.repeat(1024 * 1024);
    for (let i = 0; i < 20; i++) await big.insertOne({ i, payload });
    const all = await big.find({}, { batchSize: 1000 }).toArray();
    expect(all).toHaveLength(20);
  });

  it('generates an ObjectId _id first in the stored document', async () => {
    const docs = collection('ids');
    const { insertedId } = await docs.insertOne({ x: 1 });
    expect(insertedId).toBeInstanceOf(ObjectId);
    const stored = await docs.findOne({ _id: insertedId });
    expect(Object.keys(stored ?? {})).toEqual(['_id', 'x']);
  });

  it('updates with operators, upsert, multi and arrayFilters', async () => {
    const docs = collection('updates');
    await docs.insertMany([
      {
        _id: 1,
        n: 1,
        arr: [
          { k: 1, v: 0 },
          { k: 2, v: 0 },
        ],
      },
      { _id: 2, n: 1 },
    ]);
    const many = await docs.updateMany({ n: 1 }, { $inc: { n: 1 } });
    expect([many.matchedCount, many.modifiedCount]).toEqual([2, 2]);
    await docs.updateOne(
      { _id: 1 },
      { $set: { 'arr.$[e].v': 9 } },
      { arrayFilters: [{ 'e.k': 2 }] },
    );
    expect((await docs.findOne({ _id: 1 }))!.arr).toEqual([
      { k: 1, v: 0 },
      { k: 2, v: 9 },
    ]);
    const upsert = await docs.updateOne(
      { _id: 7, tag: 'x' },
      { $set: { n: 5 }, $setOnInsert: { created: true } },
      { upsert: true },
    );
    expect(upsert.upsertedId).toBe(7);
    expect(await docs.findOne({ _id: 7 })).toEqual({ _id: 7, tag: 'x', n: 5, created: true });
  });

  it('updates the matched array element with the positional $ operator', async () => {
    const docs = collection('positional');
    await docs.insertOne({ _id: 1, grades: [80, 85, 90] });
    await docs.updateOne({ _id: 1, grades: 85 }, { $set: { 'grades.$': 86 } });
    expect((await docs.findOne({ _id: 1 }))!.grades).toEqual([80, 86, 90]);
  });

  it('matches, sorts and updates under a case-insensitive collation', async () => {
    const docs = collection('collated');
    await docs.insertMany([
      { _id: 1, x: 'ping' },
      { _id: 2, x: 'PING' },
      { _id: 3, x: 'pong' },
    ]);
    const collation = { locale: 'en_US', strength: 2 };
    expect(await docs.countDocuments({ x: 'Ping' }, { collation })).toBe(2);
    expect(await docs.countDocuments({ x: 'Ping' })).toBe(0);
    const result = await docs.updateMany({ x: 'ping' }, { $set: { y: 1 } }, { collation });
    expect([result.matchedCount, result.modifiedCount]).toEqual([2, 2]);
    expect((await docs.distinct('x', {}, { collation })).length).toBe(2);
  });

  it('applies the update operators of an upsert whose filter has non-equality conditions', async () => {
    const docs = collection('fencedUpsert');
    await docs.updateOne({ _id: 'r', fence: { $lte: 3 } }, { $set: { a: 1 } }, { upsert: true });
    expect(await docs.findOne({ _id: 'r' })).toEqual({ _id: 'r', a: 1 });
    const stale = await docs
      .updateOne({ _id: 'r', fence: { $lte: 3 } }, { $set: { a: 2 } }, { upsert: true })
      .catch((e: unknown) => e);
    expect(stale).toMatchObject({ code: 11000 }); // the fenced-write idiom: E11000 means stale
  });

  it('reports open cursors and connections in serverStatus', async () => {
    const status = await harness().client.db('admin').command({ serverStatus: 1 });
    expect(status.metrics.cursor.open.total).toEqual(expect.any(Number));
    expect(status.connections.current).toBeGreaterThan(0);
  });

  it("accepts top-level '$' field names (5.0+) but not inside _id", async () => {
    const db = harness().client.db('crud');
    await db.command({ insert: 'dollars', documents: [{ _id: 1, $price: 5 }] });
    expect(await db.collection<any>('dollars').findOne({ _id: 1 })).toEqual({ _id: 1, $price: 5 });
    const reply = await db.command({ insert: 'dollars', documents: [{ _id: { $bad: 1 } }] });
    expect(reply.writeErrors[0]).toMatchObject({ code: 52 });
  });

  it('reports a no-op update as matched but not modified', async () => {
    const docs = collection('noop');
    await docs.insertOne({ _id: 1, a: 1 });
    const result = await docs.updateOne({ _id: 1 }, { $set: { a: 1 } });
    expect([result.matchedCount, result.modifiedCount]).toEqual([1, 0]);
  });

  it('runs pipeline updates with $$NOW fixed for the whole command', async () => {
    const docs = collection('pipeline');
    await docs.insertMany([{ _id: 1 }, { _id: 2 }]);
    await docs.updateMany({}, [{ $set: { at: '$$NOW' } }]);
    const [first, second] = await docs.find().toArray();
    expect(first.at).toBeInstanceOf(Date);
    expect(first.at.getTime()).toBe(second.at.getTime());
  });

  it('evaluates every field of one $set against the stage input, dotted paths included', async () => {
    const docs = collection('set-input');
    await docs.insertMany([
      { _id: 1, h: { x: { n: 1 } } },
      { _id: 2, h: { x: { n: 1 } } },
    ]);
    const readsInput = {
      'h.x.n': 2,
      seen: '$h.x.n',
    };
    // One $set stage (compiled), and the same with a later stage (evaluated another way).
    await docs.updateOne({ _id: 1 }, [{ $set: readsInput }]);
    await docs.updateOne({ _id: 2 }, [{ $set: readsInput }, { $unset: 'nothing' }]);
    for (const _id of [1, 2]) {
      expect(await docs.findOne({ _id })).toEqual({
        _id,
        h: { x: { n: 2 } },
        seen: 1,
      });
    }
  });

  it('findOneAndUpdate upserts with a pipeline and returns before/after images', async () => {
    const locks = collection('locks');
    const acquire = [{ $set: { owner: 'a', fence: { $add: [{ $ifNull: ['$fence', 0] }, 1] } } }];
    const first = await locks.findOneAndUpdate({ _id: 'k' }, acquire, {
      upsert: true,
      returnDocument: 'after',
      includeResultMetadata: true,
    });
    expect(first.value).toEqual({ _id: 'k', owner: 'a', fence: 1 });
    expect(first.lastErrorObject).toEqual({ n: 1, updatedExisting: false, upserted: 'k' });
    const before = await locks.findOneAndUpdate({ _id: 'k' }, acquire, {
      upsert: true,
      returnDocument: 'before',
    });
    expect(before).toEqual({ _id: 'k', owner: 'a', fence: 1 });
    const removed = await locks.findOneAndDelete({ _id: 'k' }, { projection: { fence: 1 } });
    expect(removed).toEqual({ _id: 'k', fence: 2 });
  });

  it('deletes one or many', async () => {
    const docs = collection('deletes');
    await docs.insertMany([{ a: 1 }, { a: 1 }, { a: 2 }]);
    expect((await docs.deleteOne({ a: 1 })).deletedCount).toBe(1);
    expect((await docs.deleteMany({})).deletedCount).toBe(2);
  });

  it('counts and finds distinct values', async () => {
    const docs = collection('counting');
    await docs.insertMany([{ t: ['a', 'b'] }, { t: 'a' }, { t: 'c' }]);
    expect(await docs.countDocuments({ t: 'a' })).toBe(2);
    expect(await docs.estimatedDocumentCount()).toBe(3);
    expect((await docs.distinct('t')).sort()).toEqual(['a', 'b', 'c']);
  });

  it('aggregates with mingo stages', async () => {
    const docs = collection('agg');
    await docs.insertMany([
      { g: 'x', v: 1 },
      { g: 'x', v: 2 },
      { g: 'y', v: 5 },
    ]);
    const result = await docs
      .aggregate([{ $group: { _id: '$g', total: { $sum: '$v' } } }, { $sort: { _id: 1 } }])
      .toArray();
    expect(result).toEqual([
      { _id: 'x', total: 3 },
      { _id: 'y', total: 5 },
    ]);
  });

  it('writes aggregation results with $merge (merge on _id, insert the rest)', async () => {
    const source = collection('mergeSource');
    const target = collection('mergeTarget');
    await target.insertMany([{ _id: 1, kept: true, total: 0 }]);
    await source.insertMany([
      { g: 1, v: 2 },
      { g: 1, v: 3 },
      { g: 2, v: 5 },
    ]);
    await source
      .aggregate([
        { $group: { _id: '$g', total: { $sum: '$v' } } },
        { $merge: { into: 'mergeTarget' } },
      ])
      .toArray();
    expect(await target.find({}, { sort: { _id: 1 } }).toArray()).toEqual([
      { _id: 1, kept: true, total: 5 },
      { _id: 2, total: 5 },
    ]);
  });

  it('answers an unknown command with CommandNotFound', async () => {
    const error = await harness()
      .client.db('admin')
      .command({ noSuchThing: 1 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MongoServerError);
    expect(error).toMatchObject({
      code: 59,
      codeName: 'CommandNotFound',
      errmsg: "no such command: 'noSuchThing'",
    });
  });
});
