import {
  LockLostError,
  MongoLockError,
  LockStoreUnavailableError,
  TransactionOutcomeUnknownError,
} from '../../lib/errors';
import { faultTools, settleWithin } from './adversarial/kit';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

/**
 * "Every lock command is bounded by operationTimeoutMs": the check a locked transaction makes on
 * the lock collection before its commit is one, but was sent unbounded.
 */
describe('withLock in a transaction: the lock check before the commit', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint } = faultTools(kit);

  it('settles within operationTimeoutMs when MongoDB does not answer the check', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client, operationTimeoutMs: 1_000 });
    // Only the check is an `update` here: the work writes nothing.
    await failPoint(
      { times: 1 },
      { failCommands: ['update'], blockConnection: true, blockTimeMS: 15_000 },
    );
    const outcome = await settleWithin(
      locks.withLock('tx:check', async () => 'done', { transaction: true, ttlMs: 30_000 }),
      1_000 + 2_000,
    );
    expect(outcome.status).toBe('rejected');
    expect(
      outcome.error instanceof LockStoreUnavailableError || outcome.error instanceof LockLostError,
    ).toBe(true);
  });

  it('settles within operationTimeoutMs when MongoDB does not answer the commit', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client, operationTimeoutMs: 1_000 });
    await failPoint(
      { times: 1 },
      { failCommands: ['commitTransaction'], blockConnection: true, blockTimeMS: 15_000 },
    );
    const outcome = await settleWithin(
      locks.withLock('tx:commit', async () => 'done', { transaction: true, ttlMs: 30_000 }),
      1_000 + 2_000,
    );
    expect(outcome.status).toBe('rejected');
    expect(outcome.error).toBeInstanceOf(TransactionOutcomeUnknownError);
  });

  describe('an abort MongoDB does not answer', () => {
    const blockAborts = () =>
      failPoint(
        { times: 1 },
        { failCommands: ['abortTransaction'], blockConnection: true, blockTimeMS: 15_000 },
      );

    it("a failing work's call settles within operationTimeoutMs, with the work's error", async () => {
      const client = await kit.client();
      const locks = await kit.service({ client, operationTimeoutMs: 1_000, shutdownGraceMs: 500 });
      const accounts = client
        .db(kit.mongo.dbName)
        .collection<{ _id: string; balance: number }>(`${kit.collectionName}_accounts`);
      await accounts.insertOne({ _id: 'a', balance: 10 });
      await blockAborts();
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

    it('the refusal of work that ended its transaction itself settles within it too', async () => {
      const client = await kit.client();
      const locks = await kit.service({ client, operationTimeoutMs: 1_000, shutdownGraceMs: 500 });
      const accounts = client
        .db(kit.mongo.dbName)
        .collection<{ _id: string }>(`${kit.collectionName}_accounts`);
      await blockAborts();
      const outcome = await settleWithin(
        locks.withLock(
          'tx:ended-itself',
          async (lock) => {
            // Ends the library's transaction and starts one of its own, which the library aborts.
            await lock.session!.commitTransaction();
            lock.session!.startTransaction();
            await accounts.insertOne({ _id: 'unchecked' }, { session: lock.session });
          },
          { transaction: true, ttlMs: 30_000 },
        ),
        1_000 + 2_000,
      );
      expect(outcome.status).toBe('rejected');
      expect(outcome.error).toBeInstanceOf(MongoLockError);
      expect((outcome.error as Error).message).toMatch(/ended its transaction itself/);
      expect(await accounts.findOne({ _id: 'unchecked' })).toBeNull();
    });
  });
});
