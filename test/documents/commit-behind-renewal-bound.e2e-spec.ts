import type { Document } from 'mongodb';
import { LockStoreUnavailableError } from '../../lib/errors';
import { LockTestKit, sleep } from '../lock-service/lock-test-kit';
import { faultTools, settleWithin } from '../lock-service/adversarial/kit';
import { LOAD_SLACK_MS } from '../support/load-slack';

jest.setTimeout(60_000);

/**
 * docs/outages-and-shutdown.md: a document `commit` settles within `operationTimeoutMs` whether
 * MongoDB is frozen or dead (unlike `release`, which may take one more while a renewal is in
 * flight). A commit asked while withLock's renewal is on its way waits for that renewal first.
 */
describe('a commit asked while a renewal of the document lock is unanswered', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, failPointFired, appClient } = faultTools(kit);

  it('settles within operationTimeoutMs', async () => {
    const name = 'commit_behind_renewal';
    const plain = await kit.client();
    await plain
      .db(kit.mongo.dbName)
      .collection<Document>(name)
      .insertOne({ _id: 'd' as never });
    const client = await appClient('commit-renewal');
    const operationTimeoutMs = 5_000;
    const locks = await kit.service({ client, operationTimeoutMs, shutdownGraceMs: 100 });
    const docs = locks.documents(name);
    let outcome: Awaited<ReturnType<typeof settleWithin>> | undefined;
    await docs
      .withLock(
        'd',
        async (lock) => {
          // MongoDB stops answering the lock writes: the next is withLock's renewal, a third of
          // the lease in (about 3 s), which then waits its whole bound.
          const fired = await failPoint('alwaysOn', {
            failCommands: ['findAndModify'],
            appName: 'commit-renewal',
            blockConnection: true,
            blockTimeMS: 30_000,
          });
          await failPointFired(fired + 1, 20_000);
          await sleep(500);
          outcome = await settleWithin(lock.commit({ $set: { done: true } }), 30_000);
        },
        { ttlMs: 9_000 },
      )
      .catch(() => undefined);
    await failPoint('off');
    expect(outcome?.status).toBe('rejected');
    expect((outcome as { error?: unknown }).error).toBeInstanceOf(LockStoreUnavailableError);
    // Broken: the rest of the renewal's bound (about 4.5 s), then the commit's own 5 s.
    expect(outcome!.ms).toBeLessThan(operationTimeoutMs + LOAD_SLACK_MS);
  });
});
