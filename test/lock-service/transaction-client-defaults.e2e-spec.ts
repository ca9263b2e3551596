// docs/transactions.md: give the module "the MongoClient your data uses"; the library starts
// the session and the transaction on it. A data client often reads from secondaries by default,
// or writes with w: 1. docs/guarantees.md: "Lock writes use write concern majority and reads
// read preference primary, whatever the client's defaults"; the check before the commit is a
// lock write, and lands with the commit. The driver also gives the transaction the client's read
// concern, and MongoDB refuses a transaction whose level is not local, majority or snapshot
// (InvalidOptions): a client that reads with `available` or `linearizable` is given one it takes.
import { MongoClient } from 'mongodb';
import type { CommandStartedEvent } from 'mongodb';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

describe("a locked transaction on the data client, whatever that client's defaults", () => {
  const kit = LockTestKit.forSuite();

  it("runs the work's reads and writes in the transaction", async () => {
    const client = new MongoClient(kit.mongo.uri, { readPreference: 'secondaryPreferred' });
    await client.connect();
    try {
      const { balance, stored } = await lockedDeposit(kit, client);
      expect(balance).toBe(10);
      expect(stored).toBe(15);
    } finally {
      await kit.cleanup();
      await client.close();
    }
  });

  it('commits the lock check with write concern majority on a client that writes with w: 1', async () => {
    const client = new MongoClient(kit.mongo.uri, {
      writeConcern: { w: 1 },
      monitorCommands: true,
    });
    await client.connect();
    try {
      const commits: CommandStartedEvent[] = [];
      client.on('commandStarted', (event) => {
        if (event.commandName === 'commitTransaction') commits.push(event);
      });
      const locks = await kit.service({ client });
      await locks.withLock('account:a', async () => 'done', { transaction: true });
      expect(commits).toHaveLength(1);
      expect(commits[0].command.writeConcern).toMatchObject({ w: 'majority' });
    } finally {
      await kit.cleanup();
      await client.close();
    }
  });

  it.each([
    ['linearizable', 'majority'],
    ['available', 'local'],
    ['majority', 'majority'],
    ['snapshot', 'snapshot'],
  ] as const)(
    'runs on a client that reads with read concern %s, the transaction reading with %s',
    async (clientLevel, level) => {
      const client = new MongoClient(kit.mongo.uri, {
        readConcern: { level: clientLevel },
        monitorCommands: true,
      });
      await client.connect();
      try {
        const starts: CommandStartedEvent[] = [];
        client.on('commandStarted', (event) => {
          if (event.command.startTransaction === true) starts.push(event);
        });
        const { balance, stored } = await lockedDeposit(kit, client);
        expect(balance).toBe(10);
        expect(stored).toBe(15);
        expect(starts).toHaveLength(1);
        expect(starts[0].command.readConcern).toMatchObject({ level });
      } finally {
        await kit.cleanup();
        await client.close();
      }
    },
  );
});

/**
 * A locked transaction on `client` that reads account a's balance (10) and adds 5: the balance
 * read inside it, and the one stored after it (read with `local`, whatever the client's level).
 */
async function lockedDeposit(
  kit: LockTestKit,
  client: MongoClient,
): Promise<{ balance: number | undefined; stored: number | undefined }> {
  const locks = await kit.service({ client });
  const accounts = client
    .db(kit.mongo.dbName)
    .collection<{ _id: string; balance: number }>(`${kit.collectionName}_accounts`);
  await accounts.insertOne({ _id: 'a', balance: 10 });
  const balance = await locks.withLock(
    'account:a',
    async (lock) => {
      const found = await accounts.findOne({ _id: 'a' }, { session: lock.session });
      await accounts.updateOne({ _id: 'a' }, { $inc: { balance: 5 } }, { session: lock.session });
      return found?.balance;
    },
    { transaction: true },
  );
  const stored = (await accounts.findOne({ _id: 'a' }, { readConcern: 'local' }))?.balance;
  return { balance, stored };
}
