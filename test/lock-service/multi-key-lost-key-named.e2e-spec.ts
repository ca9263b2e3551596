// A multi-key lock whose renewal MongoDB refuses for one key (a refusal that will not pass, such
// as a document validation failure) is lost, rightly; its LockLostError named the first key,
// whose renewal was answered, not the key whose renewal failed. `LockLostError.key` is documented
// as "the key whose lease was lost", and a refused renewal (an entry found gone) does name its
// own key. Likewise a holder told that an operator freed its second key (`forceRelease` in
// another instance, heard on the change stream) got `Lock "<first key>" was lost: an operator
// released it`, naming the key nobody released. Both now name the key lost.
import { LockLostError } from '../../lib';
import { eventually, LockTestKit, sleep } from './lock-test-kit';
import { describeWithFailPoints, failedKeysOf, faultTools } from './adversarial/kit';

jest.setTimeout(60_000);

describeWithFailPoints('a multi-key lock whose renewal of one key is refused', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('is lost, and its LockLostError names the key whose renewal failed', async () => {
    const client = await appClient('mk-named', { monitorCommands: true });
    const failedKeys = failedKeysOf(client);
    const locks = await kit.service({ client });
    let reason: unknown;
    await locks
      .withLock(
        ['named:a', 'named:b'],
        async (lock) => {
          // Renewed at a third of 3 s: both keys' renewals go together, the second is refused.
          await failPoint(
            { skip: 1 },
            {
              failCommands: ['findAndModify'],
              appName: 'mk-named',
              errorCode: 121,
              errorLabels: [],
            },
          );
          await new Promise((resolve) => lock.signal.addEventListener('abort', resolve));
          await failPoint('off');
          reason = lock.signal.reason;
        },
        { ttlMs: 3_000 },
      )
      .catch(() => undefined);
    await sleep(100);
    expect(failedKeys).toHaveLength(1);
    expect(reason).toBeInstanceOf(LockLostError);
    // Broken: 'named:a' (its renewal was answered), whatever key was refused.
    expect((reason as LockLostError).key).toBe(failedKeys[0]);
  });

  it('told that an operator freed its second key, names that key', async () => {
    const [holder, operator] = await Promise.all([kit.service(), kit.service()]);
    const run = holder
      .withLock(
        ['freed:a', 'freed:b'],
        (lock) => new Promise((resolve) => lock.signal.addEventListener('abort', resolve)),
        { ttlMs: 20_000 },
      )
      .catch((error: unknown) => error);
    await eventually(async () => (await operator.inspect('freed:b'))?.held === true);
    await operator.forceRelease('freed:b');
    const outcome = await run;
    expect(outcome).toBeInstanceOf(LockLostError);
    // Broken: 'freed:a' (Lock "freed:a" was lost: an operator released it).
    expect((outcome as LockLostError).key).toBe('freed:b');
  });
});
