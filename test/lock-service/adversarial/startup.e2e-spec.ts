// Adversarial review, part 3: errors and bounds before the store is open. Expected to FAIL on
// the code as reviewed.
import { LockStoreUnavailableError, MongoLockError } from '../../../lib/errors';
import { LockService } from '../../../lib/lock.service';
import { settleWithin } from './kit';
import { LOAD_SLACK_MS } from '../../support/load-slack';
import { closedPort } from '../../support/closed-port';

jest.setTimeout(60_000);

describe('adversarial review: a service whose MongoDB is unreachable at start', () => {
  it('acquire() on a service not yet started fails with a library error within timeoutMs + operationTimeoutMs', async () => {
    const port = await closedPort();
    const locks = new LockService({
      uri: `mongodb://127.0.0.1:${port}/?directConnection=true`,
      ensureIndexes: false,
      operationTimeoutMs: 500,
    });
    try {
      const tried = await settleWithin(locks.acquire('start:k', { timeoutMs: 0 }), 45_000);
      expect(tried.status).toBe('rejected');
      expect(tried.error).toBeInstanceOf(MongoLockError);
      expect(tried.error).toBeInstanceOf(LockStoreUnavailableError);
      // Unbounded, the start waits for server selection (30 s), far over the bound.
      expect(tried.ms).toBeLessThan(0 + 500 + LOAD_SLACK_MS);
    } finally {
      await locks.close().catch(() => undefined);
    }
  });

  it('onModuleInit() with MongoDB unreachable fails with a library error', async () => {
    const port = await closedPort();
    const locks = new LockService({
      uri: `mongodb://127.0.0.1:${port}/?directConnection=true&serverSelectionTimeoutMS=300`,
    });
    try {
      const started = await settleWithin(locks.onModuleInit(), 10_000);
      expect(started.status).toBe('rejected');
      expect(started.error).toBeInstanceOf(MongoLockError);
    } finally {
      await locks.close().catch(() => undefined);
    }
  });
});
