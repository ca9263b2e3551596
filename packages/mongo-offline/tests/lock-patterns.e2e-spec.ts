import { type IndexDescription, Long, type Timestamp } from 'mongodb';
import { openStream, useOfflineMongo } from './with-offline-mongo';

/** The lock library's acquire: every field keeps its value unless the key is free. */
function whenFree(newValue: unknown, oldValue: string) {
  const free = {
    $or: [{ $eq: [{ $ifNull: ['$owner', null] }, null] }, { $lte: ['$expiresAt', '$$NOW'] }],
  };
  return { $cond: [free, newValue, oldValue] };
}

function acquire(owner: string, ttlMs = 30_000) {
  return [
    {
      $set: {
        owner: whenFree(owner, '$owner'),
        fence: whenFree(
          {
            $max: [
              { $add: [{ $ifNull: ['$fence', Long.fromInt(0)] }, Long.fromInt(1)] },
              { $toLong: '$$NOW' },
            ],
          },
          '$fence',
        ),
        acquiredAt: whenFree('$$NOW', '$acquiredAt'),
        expiresAt: whenFree({ $add: ['$$NOW', ttlMs] }, '$expiresAt'),
        gcAt: whenFree(null, '$gcAt'),
      },
    },
  ];
}

const PROJECTION = {
  owner: 1,
  fence: 1,
  remainingMs: { $max: [0, { $subtract: [{ $ifNull: ['$expiresAt', '$$NOW'] }, '$$NOW'] }] },
};

describe('offline mongo: the lock library patterns', () => {
  const harness = useOfflineMongo();
  const locks = () => harness().client.db('locks').collection<any>('locks');

  it('acquires with an upserting pipeline findOneAndUpdate and projects computed fields in order', async () => {
    const reply = await locks().findOneAndUpdate({ _id: 'a' }, acquire('A'), {
      upsert: true,
      returnDocument: 'after',
      projection: PROJECTION,
    });
    expect(Object.keys(reply ?? {})).toEqual(['_id', 'owner', 'fence', 'remainingMs']);
    expect(reply).toMatchObject({ _id: 'a', owner: 'A', remainingMs: 30_000 });
    expect(Number(reply?.fence)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('writes nothing (no oplog entry, no event, same operationTime) when the key is held', async () => {
    const collection = locks();
    await collection.findOneAndUpdate({ _id: 'held' }, acquire('A'), { upsert: true });
    const stream = collection.watch<any, any>([], { maxAwaitTimeMS: 200 });
    const { next } = await openStream(harness().client, stream);
    const session = harness().client.startSession({ causalConsistency: true });
    await collection.findOneAndUpdate({ _id: 'held' }, acquire('B'), { upsert: true, session });
    const afterHeld = session.operationTime as Timestamp;
    await collection.findOneAndUpdate({ _id: 'held' }, acquire('B'), { upsert: true, session });
    expect((session.operationTime as Timestamp).equals(afterHeld)).toBe(true);
    await session.endSession();
    await collection.updateOne({ _id: 'held' }, [{ $set: { owner: null } }]);
    const event = await next;
    expect(event.operationType).toBe('update');
    expect(event.updateDescription.updatedFields).toEqual({ owner: null });
    await stream.close();
  });

  it('renews only while the lease is live ($expr against $$NOW) and filters change events server-side', async () => {
    const collection = locks();
    await collection.findOneAndUpdate({ _id: 'r' }, acquire('A', 60_000), { upsert: true });
    const ownerChanges = collection.watch<any, any>(
      [
        {
          $match: {
            $or: [
              { operationType: { $in: ['insert', 'replace', 'delete'] } },
              {
                operationType: 'update',
                'updateDescription.updatedFields.owner': { $exists: true },
              },
            ],
          },
        },
      ],
      { fullDocument: 'updateLookup' },
    );
    const { next } = await openStream(harness().client, ownerChanges);
    const renewed = await collection.findOneAndUpdate(
      { _id: 'r', owner: 'A', $expr: { $gt: ['$expiresAt', '$$NOW'] } },
      [{ $set: { expiresAt: { $add: ['$$NOW', 60_000] } } }],
    );
    expect(renewed).not.toBeNull();
    const expired = await collection.findOneAndUpdate(
      { _id: 'r', owner: 'A', $expr: { $gt: ['$expiresAt', { $add: ['$$NOW', 3_600_000] }] } },
      [{ $set: { expiresAt: '$$NOW' } }],
    );
    expect(expired).toBeNull();
    await collection.findOneAndUpdate({ _id: 'r', owner: 'A' }, [
      { $set: { owner: null, gcAt: { $add: ['$$NOW', 1000] } } },
    ]);
    const event = await next; // the renewal (expiresAt only) was filtered out
    expect(event.updateDescription.updatedFields).toMatchObject({ owner: null });
    expect(event.fullDocument).toMatchObject({ _id: 'r', owner: null });
    await ownerChanges.close();
  });

  it('creates the lock indexes idempotently', async () => {
    const indexes: IndexDescription[] = [
      { key: { gcAt: 1 }, name: 'gcAt_ttl', expireAfterSeconds: 0 },
      { key: { holder: 1 }, name: 'holder_1' },
    ];
    await locks().createIndexes(indexes);
    await locks().createIndexes(indexes);
    expect((await locks().indexes()).map((index) => index.name)).toEqual([
      '_id_',
      'gcAt_ttl',
      'holder_1',
    ]);
  });
});
