import { firstValueFrom } from 'rxjs';
import { MongoLockError } from '../../lib/errors';
import { LockTestKit } from './lock-test-kit';
import { describeWithFailPoints, faultTools, settleWithin } from './adversarial/kit';

jest.setTimeout(30_000);

// docs/waiting.md, "Waiting for a release": a look MongoDB refuses with an error that may pass
// (such as Interrupted) is made again; "Any other error ends the wait with that error". A look
// refused for good (here InvalidPipelineOperator, what a server older than the required 5.0
// answers to `$getField`) was retried for ever, as a write by token is, while inspect() failed.
describeWithFailPoints('waitForRelease whose look MongoDB refuses for good', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('ends with the error, as inspect() does', async () => {
    const holder = await kit.service();
    const client = await appClient('refused-look');
    const watcher = await kit.service({ client });
    const held = await holder.acquire('refused-look', { ttlMs: 30_000 });
    await failPoint('alwaysOn', {
      failCommands: ['find'],
      appName: 'refused-look',
      errorCode: 168, // InvalidPipelineOperator
    });
    await expect(watcher.inspect('refused-look')).rejects.toBeInstanceOf(MongoLockError);
    const waited = await settleWithin(
      firstValueFrom(watcher.waitForRelease('refused-look')),
      5_000,
    );
    await failPoint('off');
    await held.release();
    expect(waited.status).toBe('rejected');
  });
});
