import type { MongoClient } from 'mongodb';
import { LockLostError } from '../../lib/errors';
import { LockService } from '../../lib';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

/**
 * `withLock(..., { transaction: true })` on engine v2: before the commit, a write to the key's
 * line inside the transaction proves the call's entry still holds.
 */
describe('engine v2: withLock in a transaction', () => {
  const kit = LockTestKit.forSuite();
  const accountsIn = async (client: MongoClient, name: string) => {
    const accounts = client.db(kit.mongo.dbName).collection<{ _id: string; balance: number }>(name);
    await accounts.insertOne({ _id: 'a', balance: 10 });
    return accounts;
  };
  const lines = async () =>
    (await kit.client()).db(kit.mongo.dbName).collection(`${kit.collectionName}_line`);

  it('commits the work with the lock held, on the session the handle carries', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client, engine: 'v2' });
    const accounts = await accountsIn(client, 'v2_tx_accounts');
    const seen = await locks.withLock(
      'account:a',
      async (lock) => {
        expect(LockService.current()?.session).toBe(lock.session);
        await accounts.updateOne({ _id: 'a' }, { $inc: { balance: 5 } }, { session: lock.session });
        // Not visible outside the transaction before it commits.
        return (await accounts.findOne({ _id: 'a' }))?.balance;
      },
      { transaction: true },
    );
    expect(seen).toBe(10);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(15);
    expect((await locks.inspect('account:a'))?.held).toBe(false);
  });

  it('never commits work whose entry left the line before the commit', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client, engine: 'v2' });
    const accounts = await accountsIn(client, 'v2_tx_lost');
    let runs = 0;
    await expect(
      locks.withLock(
        'account:a',
        async (lock) => {
          runs += 1;
          await accounts.updateOne(
            { _id: 'a' },
            { $inc: { balance: 5 } },
            { session: lock.session },
          );
          // An operator removes the entry while the work runs, after the transaction began.
          await (await lines()).updateOne({ _id: 'account:a' as never }, { $set: { line: [] } });
        },
        { transaction: true },
      ),
    ).rejects.toBeInstanceOf(LockLostError);
    expect(runs).toBeGreaterThanOrEqual(1);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(10);
  });

  it('runs again when the line changed during the work, and commits once', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client, engine: 'v2' });
    const other = await kit.service({ engine: 'v2' });
    const accounts = await accountsIn(client, 'v2_tx_rerun');
    let runs = 0;
    let waiting: Promise<unknown> | undefined;
    await locks.withLock(
      'account:a',
      async (lock) => {
        runs += 1;
        await accounts.updateOne({ _id: 'a' }, { $inc: { balance: 5 } }, { session: lock.session });
        // Another process joins the line to wait: a write to the document the check writes.
        if (runs === 1) {
          waiting = other.acquire('account:a', { timeoutMs: 20_000 });
          await new Promise((resolve) => setTimeout(resolve, 300));
        }
      },
      { transaction: true },
    );
    expect(runs).toBe(2);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(15);
    const next = (await waiting) as { release(): Promise<void> };
    await next.release();
  });
});
