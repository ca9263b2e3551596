// The client is the application's, with its own BSON options: the library decodes fences,
// permits and leases the same whatever they are. `promoteValues: false` failed every
// acquisition ("value.toBigInt is not a function") before the lock collections pinned them.
import { MongoClient } from 'mongodb';
import type { Document, MongoClientOptions } from 'mongodb';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

describe("a client with the application's own BSON options", () => {
  const kit = LockTestKit.forSuite();
  const clients: MongoClient[] = [];
  afterAll(() => Promise.all(clients.map((client) => client.close())));

  async function serviceOver(options: MongoClientOptions) {
    const client = new MongoClient(kit.mongo.uri, options);
    clients.push(client);
    await client.connect();
    return { locks: await kit.service({ client }), client };
  }

  it.each<[string, MongoClientOptions]>([
    ['promoteValues: false', { promoteValues: false }],
    ['promoteLongs: false', { promoteLongs: false }],
    ['useBigInt64: true', { useBigInt64: true }],
    ['raw: true', { raw: true }],
  ])('%s: mutex, semaphore and document locks work', async (name, options) => {
    const { locks, client } = await serviceOver(options);
    const key = `bson:${name}`;

    const first = await locks.acquire(key);
    await first.release();
    const second = await locks.acquire(key);
    expect(second.fence).toBeGreaterThan(first.fence);
    await second.release();

    // Served at another instance's release: the news comes by the change stream.
    const other = await kit.service();
    const held = await other.acquire(key);
    const waiting = locks.acquire(key, { timeoutMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    await held.release();
    await (await waiting).release();

    const permits = { permits: 2 };
    const a = await locks.acquire(`${key}:sem`, permits);
    const b = await locks.acquire(`${key}:sem`, permits);
    expect(await locks.tryAcquire(`${key}:sem`, permits)).toBeNull();
    await Promise.all([a.release(), b.release()]);

    const collection = `bson_${clients.length}`;
    await client
      .db(kit.mongo.dbName)
      .collection<Document>(collection)
      .insertOne({ _id: 'd' as never, n: 1 });
    const lock = await locks.documents(collection).acquire('d');
    await lock.commit({ $inc: { n: 1 } });
    const stored = await kit.client().then((plain) =>
      plain
        .db(kit.mongo.dbName)
        .collection(collection)
        .findOne({ _id: 'd' as never }),
    );
    expect(stored?.n).toBe(2);
  });
});
