// docs/transactions.md: "After any failure (an unknown commit, or an abort that MongoDB did not
// answer) the transaction is ended on the server with killSessions before the call rejects";
// the library's commands are bounded by operationTimeoutMs (docs/upgrading.md, API).
import { faultTools, settleWithin } from './adversarial/kit';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

describe('withLock in a transaction: an abort MongoDB does not answer', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint } = faultTools(kit);

  it("a failing work's call settles within operationTimeoutMs, with the work's error", async () => {
    const client = await kit.client();
    const locks = await kit.service({ client, operationTimeoutMs: 1_000, shutdownGraceMs: 500 });
    const accounts = client
      .db(kit.mongo.dbName)
      .collection<{ _id: string; balance: number }>(`${kit.collectionName}_accounts`);
    await accounts.insertOne({ _id: 'a', balance: 10 });
    await failPoint(
      { times: 1 },
      { failCommands: ['abortTransaction'], blockConnection: true, blockTimeMS: 15_000 },
    );
    const declined = new Error('payment declined');
    const outcome = await settleWithin(
      locks.withLock(
        'tx:abort',
        async (lock) => {
          await accounts.updateOne(
            { _id: 'a' },
            { $inc: { balance: 5 } },
            { session: lock.session },
          );
          throw declined;
        },
        { transaction: true, ttlMs: 30_000 },
      ),
      1_000 + 2_000,
    );
    expect(outcome).toMatchObject({ status: 'rejected', error: declined });
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(10);
  });
});
