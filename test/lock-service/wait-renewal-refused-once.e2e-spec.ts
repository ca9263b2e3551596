// A call waiting in line whose routine renewal (a third into its entry's lease) MongoDB refuses
// once in passing (an Interrupted killOp, an InternalError, TemporarilyUnavailable): its entry
// is still there, and the next try succeeds. The wait must go on until the holder releases or
// its timeoutMs ends, not fail at once with the refusal.
import type { LockHandle } from '../../lib';
import { eventually, LockTestKit } from './lock-test-kit';
import { describeWithFailPoints, faultTools } from './adversarial/kit';

jest.setTimeout(60_000);

describeWithFailPoints('a waiting call whose renewal MongoDB refuses once', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it.each([
    ['Interrupted', 11601],
    ['InternalError', 1],
    ['TemporarilyUnavailable', 365],
  ])('(%s) keeps waiting, and holds once the holder releases', async (_name, code) => {
    const a = await kit.service();
    const holder = await a.acquire('wait-refused:k', { ttlMs: 10_000 });
    const client = await appClient('wait-refused');
    const w = await kit.service({ client });
    const waiting = w
      .acquire('wait-refused:k', { ttlMs: 3_000, timeoutMs: 8_000 })
      .catch((error: unknown) => error);
    await eventually(async () => (await a.inspect('wait-refused:k'))?.waiting === 1);
    // Its next lock write is the renewal of its waiting entry, 1 s into its 3 s lease.
    const armed = await failPoint(
      { times: 1 },
      { failCommands: ['findAndModify'], appName: 'wait-refused', errorCode: code },
    );
    const releasing = new Promise((resolve) => setTimeout(resolve, 2_500)).then(() =>
      holder.release(),
    );
    const got = await waiting;
    await releasing;
    if (typeof (got as LockHandle).release === 'function') await (got as LockHandle).release();
    expect(await failPoint('off')).toBe(armed + 1);
    // Broken: the call fails about 1 s in with MongoLockError ("Lock command renew failed").
    expect(got).not.toBeInstanceOf(Error);
  });
});
