// A join MongoDB refused (a write error, no rights) wrote nothing: the caller is told what the
// server said, and no leave follows. A join whose outcome is unknown (a lost reply) may have
// landed: the caller sees LockStoreUnavailableError and a leave by token is sent.
import type { CommandStartedEvent, Document, MongoClientOptions } from 'mongodb';
import { MongoClient, MongoServerError } from 'mongodb';
import { LockStoreUnavailableError, MongoLockError } from '../../lib/errors';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

describeWithFailPoints('a join that fails', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, failPointFired, appClient } = faultTools(kit);

  /** A service on its own client, and the leaves (findAndModify by our token) it sends. */
  async function watchedService(appName: string, options: MongoClientOptions = {}) {
    const client = await appClient(appName, { monitorCommands: true, ...options });
    const locks = await kit.service({ client });
    const leaves: Document[] = [];
    client.on('commandStarted', (event: CommandStartedEvent) => {
      const query = event.command.query as Document | undefined;
      if (event.commandName === 'findAndModify' && typeof query?.['line.t'] === 'string') {
        leaves.push(event.command);
      }
    });
    return { locks, leaves };
  }

  async function outcome(attempt: Promise<unknown>): Promise<unknown> {
    return attempt.then(
      () => 'resolved',
      (error: unknown) => error,
    );
  }

  it.each([
    ['a document validation failure', 121, 'tryAcquire'],
    ['an authorization error', 13, 'tryAcquire'],
    ['a document validation failure', 121, 'acquire'],
  ] as const)('%s (code %d) of %s is reported as such, with no leave', async (_, code, call) => {
    const appName = `refused-${code}-${call}`;
    const { locks, leaves } = await watchedService(appName);
    await failPoint(
      { times: 1 },
      { failCommands: ['findAndModify'], appName, errorCode: code, errorLabels: [] },
    );
    const failed = await outcome(
      call === 'tryAcquire'
        ? locks.tryAcquire('refused:k')
        : locks.acquire('refused:k', { timeoutMs: 2_000 }),
    );
    await locks.close();

    expect(failed).toBeInstanceOf(MongoLockError);
    expect(failed).not.toBeInstanceOf(LockStoreUnavailableError);
    expect((failed as Error).cause).toBeInstanceOf(MongoServerError);
    expect(((failed as Error).cause as MongoServerError).code).toBe(code);
    expect(leaves).toHaveLength(0);
  });

  it('a join whose reply was lost is of unknown outcome: LockStoreUnavailableError, then a leave', async () => {
    const appName = 'lost-reply';
    const { locks, leaves } = await watchedService(appName);
    // The driver retries a write once on a network error: both attempts lose their reply.
    await failPoint(
      { times: 2 },
      { failCommands: ['findAndModify'], appName, closeConnection: true },
    );
    const failed = await outcome(locks.tryAcquire('lost:k'));
    await locks.close();

    expect(failed).toBeInstanceOf(LockStoreUnavailableError);
    expect(leaves.length).toBeGreaterThan(0);
  });

  it('a refused retry of a join whose reply was lost still leaves: the first may have landed', async () => {
    const appName = 'lost-then-refused';
    // No retry by the driver: the library's own retry (by token) is the one refused.
    const { locks, leaves } = await watchedService(appName, { retryWrites: false });
    const before = await failPoint(
      { times: 1 },
      {
        failCommands: ['findAndModify'],
        appName,
        closeConnection: true,
        blockConnection: true,
        blockTimeMS: 300,
      },
    );
    const acquiring = outcome(locks.acquire('lost-then-refused:k', { timeoutMs: 3_000 }));
    // The first join is held on the server; the retry after its lost reply is refused.
    await failPointFired(before + 1);
    await failPoint(
      { times: 1 },
      { failCommands: ['findAndModify'], appName, errorCode: 121, errorLabels: [] },
    );
    const failed = await acquiring;
    await locks.close();

    expect(((failed as Error).cause as MongoServerError).code).toBe(121);
    expect(leaves.length).toBeGreaterThan(0);
  });

  it.each(['tryAcquire', 'acquire'] as const)(
    'a join that landed, whose driver retry is refused, of %s still leaves: the key is not kept for a lease',
    async (call) => {
      const appName = `landed-${call}`;
      const { locks, leaves } = await watchedService(appName);
      const other = await kit.service({ holderId: 'other' });
      const key = `landed:${call}`;
      await locks.inspect(key);
      // The first attempt lands and its reply is lost; the driver retries it, and the retry is
      // refused with IncompleteTransactionHistory (a server that lost the write's history).
      const admin = await MongoClient.connect(kit.mongo.uri);
      await admin.db('admin').command({
        configureFailPoint: 'onPrimaryTransactionalWrite',
        mode: { times: 1 },
        data: { closeConnection: true },
      });
      await admin.close();
      await failPoint(
        { skip: 1 },
        { failCommands: ['findAndModify'], appName, errorCode: 217, errorLabels: [] },
      );
      const failed = await outcome(
        call === 'tryAcquire' ? locks.tryAcquire(key) : locks.acquire(key, { timeoutMs: 2_000 }),
      );
      await failPoint('off');
      const taken = await other.acquire(key, { timeoutMs: 5_000 });
      await taken.release();
      await locks.close();

      expect(((failed as Error).cause as MongoServerError).code).toBe(217);
      expect(leaves.length).toBeGreaterThan(0);
    },
  );
});
