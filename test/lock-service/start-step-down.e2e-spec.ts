// `start()` while the primary steps down rides out the election within operationTimeoutMs
// (connecting and creating the indexes are retried on retryable errors), as lock commands do.
import { LockService } from '../../lib/lock.service';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

const STEP_DOWN_SECS = 2;

describe('start() during a step-down', () => {
  const kit = LockTestKit.forSuite();

  async function stepDown(): Promise<void> {
    const admin = await kit.client();
    // A client that has seen the primary: its next write meets NotWritablePrimary.
    await admin.db('admin').command({ replSetStepDown: STEP_DOWN_SECS, force: true });
  }

  it('a service on a connected client starts once a primary is back', async () => {
    const client = await kit.client();
    await client.db(kit.mongo.dbName).command({ ping: 1 });
    await stepDown();
    const startedAt = performance.now();
    const service = new LockService(kit.options({ client, operationTimeoutMs: 8_000 }));
    try {
      await service.start();
      expect(performance.now() - startedAt).toBeLessThan(8_000);
      const handle = await service.acquire('after-step-down', { timeoutMs: 2_000 });
      await handle.release();
    } finally {
      await service.close();
    }
  });

  it('a service with its own client starts once a primary is back', async () => {
    await stepDown();
    const service = new LockService(kit.options({ operationTimeoutMs: 8_000 }));
    try {
      await service.start();
      const handle = await service.acquire('after-step-down-2', { timeoutMs: 2_000 });
      await handle.release();
    } finally {
      await service.close();
    }
  });

  it('a createIndexes refused by a primary stepping down is tried again', async () => {
    const admin = await kit.client();
    // The election's errors as a fail point: the first two tries meet them, the third lands.
    await admin.db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 2 },
      data: { failCommands: ['createIndexes'], errorCode: 189 }, // PrimarySteppedDown
    });
    const service = new LockService(kit.options({ operationTimeoutMs: 5_000 }));
    try {
      await service.start();
      const indexes = await admin
        .db(kit.mongo.dbName)
        .collection(`${kit.collectionName}_line`)
        .indexes();
      expect(indexes.map((index) => index.name)).toEqual(
        expect.arrayContaining(['gcAt_ttl', 'line_scope']),
      );
    } finally {
      await admin.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
      await service.close();
    }
  });

  it('an error that retrying cannot heal fails the start at once', async () => {
    const admin = await kit.client();
    await admin.db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['createIndexes'], errorCode: 13 }, // Unauthorized
    });
    const startedAt = performance.now();
    const service = new LockService(kit.options({ operationTimeoutMs: 5_000 }));
    try {
      const error = await service.start().catch((caught: unknown) => caught);
      expect((error as Error).name).toBe('MongoLockError');
      // Retried, it would fail only at operationTimeoutMs (5 s), over this bound.
      expect(performance.now() - startedAt).toBeLessThan(2 * LOAD_SLACK_MS);
    } finally {
      await admin.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
      await service.close().catch(() => undefined);
    }
  });

  it('still fails within operationTimeoutMs when no primary comes back in time', async () => {
    const admin = await kit.client();
    // No primary for 5 s: a start that waited for it would be over the bound below.
    await admin.db('admin').command({ replSetStepDown: 5, force: true });
    const startedAt = performance.now();
    const service = new LockService(kit.options({ operationTimeoutMs: 1_000 }));
    const error = await service.start().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toBe('LockStoreUnavailableError');
    expect(performance.now() - startedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    await service.close().catch(() => undefined);
    // Let the primary come back for the next test file's sake.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
  });
});
