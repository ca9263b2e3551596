import type { Collection } from 'mongodb';
import { LockLostError } from '../../lib/errors';
import type { LockService } from '../../lib/lock.service';
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

  /**
   * A transaction whose work writes an account and, on its first run, calls `takeAway`: its
   * outcome, whether each run found its signal aborted, and the balance after.
   */
  async function runTakenAway(
    extra: { shutdownGraceMs?: number },
    takeAway: (locks: LockService) => Promise<void>,
  ) {
    const client = await kit.client();
    const locks = await kit.service({ client, ...extra });
    const accounts: Accounts = client
      .db(kit.mongo.dbName)
      .collection(`rerun_${kit.collectionName}`);
    await accounts.insertOne({ _id: 'a', balance: 10 });
    const abortedAtRun: boolean[] = [];
    const outcome = await settle(
      locks.withLock(
        'account:a',
        async (lock) => {
          abortedAtRun.push(lock.signal.aborted);
          const inc = { $inc: { balance: 5 } };
          await accounts.updateOne({ _id: 'a' }, inc, { session: lock.session });
          if (abortedAtRun.length === 1) await takeAway(locks);
        },
        { transaction: true },
      ),
    );
    return { outcome, abortedAtRun, balance: (await accounts.findOne({ _id: 'a' }))?.balance };
  }

  it('releaseAllHeld() during the work: the work is not run again without the lock', async () => {
    const ran = await runTakenAway({}, async (locks) => void (await locks.releaseAllHeld()));
    expect(ran).toEqual({ outcome: expect.any(LockLostError), abortedAtRun: [false], balance: 10 });
  });

  it('close() during the work: past the grace period the work is not run again', async () => {
    let closing: Promise<void> | undefined;
    const ran = await runTakenAway({ shutdownGraceMs: 300 }, async (locks) => {
      closing = locks.close();
      // Work that outlives the grace period (it does not watch the signal).
      await sleep(1_000);
    });
    await closing;
    expect(ran).toEqual({ outcome: expect.any(LockLostError), abortedAtRun: [false], balance: 10 });
  });
});
