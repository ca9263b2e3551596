// withLock "always releases" its keys. When MongoDB refuses the leave of one key of a multi-key
// lock once, with a refusal that says nothing was written (here Unauthorized, as after a role
// change that is undone at once), the other key was released, this one was never sent again:
// withLock resolves (it logs a warning), renewals have stopped, and the key stays held by an
// entry nobody uses until its whole lease runs out; the handle is neither released nor lost, and
// its signal aborts later, after withLock has returned. A release MongoDB did not confirm is
// retried in the background (LockHandle.release's JSDoc); this one, which MongoDB refused, was
// not. Now it is given back in the background too.
// Also seen: the warning logged names the handle's first key ("Could not release "refused:a"")
// when refused:b's leave (sent first: keys are released last first) was the one refused, and the
// service's close() then waits until that lease ends (7.4 s here), for no work in flight.
import { Logger } from '@nestjs/common';
import { LockTestKit, sleep } from './lock-test-kit';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import type { LockHandle } from '../../lib';

jest.setTimeout(60_000);

describeWithFailPoints('a multi-key withLock whose leave of one key is refused once', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('frees both keys, not one of them only after its lease', async () => {
    const other = await kit.service();
    const client = await appClient('mk-refused');
    const locks = await kit.service({ client });
    let handle: LockHandle | undefined;
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    await locks.withLock(
      ['refused:a', 'refused:b'],
      async (lock) => {
        handle = lock;
        // The next lock write, one of the two leaves sent together at the end, is refused.
        await failPoint(
          { times: 1 },
          {
            failCommands: ['findAndModify'],
            appName: 'mk-refused',
            errorCode: 13,
            errorLabels: [],
          },
        );
      },
      { ttlMs: 10_000 },
    );
    await failPoint('off');
    const warnings = warn.mock.calls.map(([message]) => String(message));
    warn.mockRestore();
    // Broken: 'Could not release "refused:a"', whichever key's leave was refused.
    expect(warnings).toEqual([
      expect.stringMatching(/^Could not release "refused:a", "refused:b": /),
    ]);
    await sleep(2_000);
    const held = [
      (await other.inspect('refused:a'))?.held,
      (await other.inspect('refused:b'))?.held,
    ];
    // Broken: [false, true] or [true, false]: one key stays held for its whole 10 s lease.
    expect(held).toEqual([false, false]);
    expect(handle?.released).toBe(true);
  });
});
