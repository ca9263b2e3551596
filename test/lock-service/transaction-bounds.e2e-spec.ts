import {
  LockLostError,
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
});
