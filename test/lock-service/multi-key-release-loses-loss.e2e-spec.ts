// release() of a multi-key lock sends every key's leave together. When one key's leave finds its
// entry gone (an operator freed it, unheard here: no change stream) and another key's leave fails
// in passing, the loss found for the first key was dropped: once the failed key's give-back was
// answered the handle counted as released, never lost, though the work ran without one of its
// keys. Now release() rejects with LockLostError. The same release of a one-key lock rejects with LockLostError.
import { LockLostError } from '../../lib';
import type { LockHandle } from '../../lib';
import { LockTestKit, sleep } from './lock-test-kit';
import { describeWithFailPoints, faultTools } from './adversarial/kit';

jest.setTimeout(60_000);

describeWithFailPoints('release() of a multi-key lock, one key freed by an operator', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('reports the loss, even when the other key needed a second try', async () => {
    const operator = await kit.service();
    const client = await appClient('mk-release-loss');
    const locks = await kit.service({ client, changeStreams: 'off' });
    const handle: LockHandle = await locks.acquire(['gone:a', 'gone:b'], { ttlMs: 20_000 });
    let emitted: unknown;
    handle.lost$.subscribe((error) => (emitted = error));
    // Freed by an operator elsewhere: this instance does not hear of it (no change stream).
    expect(await operator.forceRelease('gone:a')).toHaveLength(1);
    // The first of the two leaves to reach MongoDB (gone:b's: keys are released last first)
    // fails in passing (Interrupted); retried in the background, it is answered.
    await failPoint(
      { times: 1 },
      {
        failCommands: ['findAndModify'],
        appName: 'mk-release-loss',
        errorCode: 11601,
        errorLabels: [],
      },
    );
    const first = await handle.release().catch((error: unknown) => error);
    await failPoint('off');
    await sleep(1_500);
    const later = await handle.release().catch((error: unknown) => error);
    expect((await operator.inspect('gone:b'))?.held).toBe(false);
    // Broken: lost false, nothing emitted, `first` the Interrupted failure and `later` resolved.
    expect(handle.lost).toBe(true);
    expect(emitted).toBeInstanceOf(LockLostError);
    expect(first).toBeInstanceOf(LockLostError);
    // The other key's give-back landed: the loss still stands.
    expect(later).toBe(first);
  });
});
