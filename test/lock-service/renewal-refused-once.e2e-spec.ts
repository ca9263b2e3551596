// A scheduled renewal that MongoDB refuses once with an error that does not say nothing was
// written and never will be (an Interrupted killOp, an InternalError, TemporarilyUnavailable
// under cache pressure), with most of the lease still left: the next try succeeds, so the holder
// must not be told its lock is lost. Renewals already retry "unavailable" errors until the local
// deadline; these are just as passing.
import { LockTestKit } from './lock-test-kit';
import { describeWithFailPoints, faultTools } from './adversarial/kit';

jest.setTimeout(60_000);

describeWithFailPoints('a renewal refused once by MongoDB', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it.each([
    ['Interrupted', 11601],
    ['InternalError', 1],
    ['TemporarilyUnavailable', 365],
  ])('(%s) is retried: withLock finishes its work, never told of a loss', async (_name, code) => {
    const client = await appClient('renew-refused');
    const locks = await kit.service({ client });
    let armed = 0;
    const result = await locks
      .withLock(
        'renew-refused:k',
        async (lock) => {
          // The first renewal (a third into the 3 s lease) is refused; 2 s are left then.
          armed = await failPoint(
            { times: 1 },
            { failCommands: ['findAndModify'], appName: 'renew-refused', errorCode: code },
          );
          await new Promise((resolve) => setTimeout(resolve, 2_500));
          return lock.signal.aborted ? 'told it was lost' : 'done';
        },
        { ttlMs: 3_000 },
      )
      .catch((error: unknown) => error);
    expect(await failPoint('off')).toBe(armed + 1);
    // Broken: the refused renewal marks the lock lost at once; withLock rejects with it.
    expect(result).toBe('done');
  });
});
