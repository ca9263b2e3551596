import type { Collection } from 'mongodb';
import { LockLostError } from '../../lib/errors';
import { LockTestKit, settle, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

type Accounts = Collection<{ _id: string; balance: number }>;

/**
 * A locked transaction whose lock is taken away while its work runs (releaseAllHeld, or the end
 * of close()'s grace period) must not run the work again: the lock is gone, so a rerun would run
 * unprotected (another process may hold the key by then).
 */
describe('withLock in a transaction: the lock taken away during the work', () => {
  const kit = LockTestKit.forSuite();

  async function setUp(name: string, extra: { shutdownGraceMs?: number } = {}) {
    const client = await kit.client();
    const locks = await kit.service({ client, ...extra });
    const accounts: Accounts = client.db(kit.mongo.dbName).collection(name);
    await accounts.insertOne({ _id: 'a', balance: 10 });
    return { locks, accounts };
  }

  it('releaseAllHeld() during the work: the work is not run again without the lock', async () => {
    const { locks, accounts } = await setUp('rerun_release_all');
    let runs = 0;
    const abortedAtRun: boolean[] = [];
    const outcome = await settle(
      locks.withLock(
        'account:a',
        async (lock) => {
          runs += 1;
          abortedAtRun.push(lock.signal.aborted);
          await accounts.updateOne(
            { _id: 'a' },
            { $inc: { balance: 5 } },
            { session: lock.session },
          );
          if (runs === 1) await locks.releaseAllHeld();
        },
        { transaction: true },
      ),
    );
    expect(outcome).toBeInstanceOf(LockLostError);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(10);
    expect(abortedAtRun).toEqual([false]);
    expect(runs).toBe(1);
  });

  it('close() during the work: past the grace period the work is not run again', async () => {
    const { locks, accounts } = await setUp('rerun_close', { shutdownGraceMs: 300 });
    let runs = 0;
    const abortedAtRun: boolean[] = [];
    let closing: Promise<void> | undefined;
    const outcome = await settle(
      locks.withLock(
        'account:a',
        async (lock) => {
          runs += 1;
          abortedAtRun.push(lock.signal.aborted);
          await accounts.updateOne(
            { _id: 'a' },
            { $inc: { balance: 5 } },
            { session: lock.session },
          );
          if (runs === 1) {
            closing = locks.close();
            // Work that outlives the grace period (it does not watch the signal).
            await sleep(1_000);
          }
        },
        { transaction: true },
      ),
    );
    await closing;
    expect(outcome).toBeInstanceOf(LockLostError);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(10);
    expect(abortedAtRun).toEqual([false]);
    expect(runs).toBe(1);
  });
});
