import { LockStoreUnavailableError, MongoLockError } from '../../lib/errors';
import { LockService } from '../../lib/lock.service';
import { describeWithFailPoints, faultTools, settleWithin } from './adversarial/kit';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

/** A duration printed with a fraction: `4999.029018000001 ms`. */
const FRACTIONAL_MS = /\d\.\d+ ms/;

describeWithFailPoints('messages of a failed start, and durations in messages', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('a start whose index creation fails says the service could not start, not that an outcome is unknown', async () => {
    const client = await appClient('start-fails');
    await failPoint('alwaysOn', {
      failCommands: ['createIndexes'],
      appName: 'start-fails',
      errorCode: 85,
      errmsg: 'an index with this name exists with other options',
    });
    const locks = new LockService(kit.options({ client }));
    const error = await locks.start().then(
      () => undefined,
      (failure: unknown) => failure as Error,
    );
    await locks.close().catch(() => undefined);
    expect(error).toBeInstanceOf(MongoLockError);
    expect(error).not.toBeInstanceOf(LockStoreUnavailableError);
    // The server's reason follows (the offline test server words it its own way).
    expect(error!.message).toMatch(/^LockService could not start: \S/);
    expect(error!.message).not.toMatch(/outcome|Lock command/);
  });

  it('a start that MongoDB does not answer in time says so, in whole ms, without "outcome is unknown"', async () => {
    const client = await appClient('start-slow');
    await failPoint('alwaysOn', {
      failCommands: ['createIndexes'],
      appName: 'start-slow',
      blockConnection: true,
      blockTimeMS: 1_500,
    });
    const locks = new LockService(kit.options({ client, operationTimeoutMs: 300 }));
    const error = await locks.start().then(
      () => undefined,
      (failure: unknown) => failure as Error,
    );
    await failPoint('off');
    await locks.close().catch(() => undefined);
    expect(error).toBeInstanceOf(LockStoreUnavailableError);
    expect(error!.message).toBe(
      'LockService could not start: MongoDB did not answer within 300 ms ' +
        "(connecting, then creating the lock collection's indexes)",
    );
    expect(error!.message).not.toMatch(/outcome/);
  });

  it('an acquisition MongoDB does not answer within its timeoutMs says so, in whole ms', async () => {
    const client = await appClient('acquire-slow');
    const locks = await kit.service({ client, operationTimeoutMs: 5_000 });
    await failPoint('alwaysOn', {
      failCommands: ['findAndModify', 'update', 'aggregate'],
      appName: 'acquire-slow',
      blockConnection: true,
      blockTimeMS: 3_000,
    });
    // The join is unanswered at the call's deadline and 1 s past it: MongoDB's silence, not a
    // holder, is why it failed (docs/engine-v2.md); the entry it may have made is left in the
    // background.
    const acquiring = await settleWithin(locks.acquire('slow:k', { timeoutMs: 700 }), 10_000);
    await failPoint('off');
    expect(acquiring.error).toBeInstanceOf(LockStoreUnavailableError);
    const message = (acquiring.error as Error).message;
    expect(message).toBe(
      'MongoDB did not answer the acquisition of "slow:k" within 700 ms and 1000 ms more for its reply',
    );
    expect(message).not.toMatch(FRACTIONAL_MS);
  });
});
