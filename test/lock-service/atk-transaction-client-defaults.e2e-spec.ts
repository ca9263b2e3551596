// docs/transactions.md: give the module "the MongoClient your data uses"; the library starts
// the session and the transaction on it. A data client often reads from secondaries by default.
import { MongoClient } from 'mongodb';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

describe('a locked transaction on a client that reads from secondaries by default', () => {
  const kit = LockTestKit.forSuite();

  it("runs the work's reads and writes in the transaction", async () => {
    const client = new MongoClient(kit.mongo.uri, { readPreference: 'secondaryPreferred' });
    await client.connect();
    try {
      const locks = await kit.service({ client });
      const accounts = client
        .db(kit.mongo.dbName)
        .collection<{ _id: string; balance: number }>(`${kit.collectionName}_accounts`);
      await accounts.insertOne({ _id: 'a', balance: 10 });
      const balance = await locks.withLock(
        'account:a',
        async (lock) => {
          const found = await accounts.findOne({ _id: 'a' }, { session: lock.session });
          await accounts.updateOne(
            { _id: 'a' },
            { $inc: { balance: 5 } },
            { session: lock.session },
          );
          return found?.balance;
        },
        { transaction: true },
      );
      expect(balance).toBe(10);
      expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(15);
    } finally {
      await kit.cleanup();
      await client.close();
    }
  });
});
