import { MongoClient } from 'mongodb';
import { openStream, useOfflineMongo } from './with-offline-mongo';

describe('offline mongo: simulated replSetStepDown', () => {
  const harness = useOfflineMongo();
  let direct: MongoClient;

  beforeAll(async () => {
    const uri = harness().mongo.uri.replace('replicaSet=rs0', 'directConnection=true');
    direct = await MongoClient.connect(uri);
  });
  afterAll(() => direct.close());

  it('is a secondary refusing writes for the step-down period, then primary again', async () => {
    const items = harness().client.db('step').collection<any>('items');
    await items.insertOne({ _id: 'before' });
    const stream = items.watch<any, any>();
    const { next: firstEvent } = await openStream(harness().client, stream);

    await harness().client.db('admin').command({ replSetStepDown: 2, force: true });

    const hello = await direct.db('admin').command({ hello: 1 });
    expect(hello).toMatchObject({ isWritablePrimary: false, secondary: true, setName: 'rs0' });
    expect(hello.primary).toBeUndefined();
    await expect(
      direct.db('step').command({ insert: 'items', documents: [{ _id: 'refused' }] }),
    ).rejects.toMatchObject({
      code: 10107,
      codeName: 'NotWritablePrimary',
    });

    // A retryable write waits for a primary, which is back after two seconds.
    await items.insertOne({ _id: 'after' });
    expect(await direct.db('admin').command({ hello: 1 })).toMatchObject({
      isWritablePrimary: true,
      secondary: false,
    });
    expect((await items.find().toArray()).map((d) => d._id)).toEqual(['before', 'after']);

    // The change stream's cursor was killed by the step-down; the driver resumed it.
    expect((await firstEvent).documentKey).toEqual({ _id: 'after' });
    await stream.close();
  }, 20_000);
});
