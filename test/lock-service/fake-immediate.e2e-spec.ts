import { LOAD_SLACK_MS } from '../support/load-slack';
import { eventually, LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

// A test's fake timers replace the globals: the library's own waits use the timers module's
// functions, so an application under test that fakes `setImmediate` still has its hand-offs
// carried by the change stream, not by a waiter's renewal timer.
describe('Hand-offs while a test fakes setImmediate', () => {
  const kit = LockTestKit.forSuite();

  it('every hand-off between two services arrives by its change event', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    // Only setImmediate (and clearImmediate): the rest keeps the driver and the test running.
    jest.useFakeTimers({
      doNotFake: [
        'Date',
        'hrtime',
        'nextTick',
        'performance',
        'queueMicrotask',
        'setInterval',
        'clearInterval',
        'setTimeout',
        'clearTimeout',
      ],
    });
    try {
      for (let round = 0; round < 4; round += 1) {
        const held = await a.acquire('fake-immediate', { ttlMs: 10_000 });
        const waiting = b.acquire('fake-immediate', { ttlMs: 30_000, timeoutMs: 5_000 });
        // b waits in line before the release: the hand-off must come by the change event.
        await eventually(async () => (await a.inspect('fake-immediate'))?.waiting === 1);
        const releasedAt = performance.now();
        await held.release();
        const next = await waiting;
        // The event takes milliseconds; without it the waiter's own timer (a third of its 30 s
        // lease) is past its 5 s timeout, and `waiting` rejects.
        expect(performance.now() - releasedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
        await next.release();
      }
    } finally {
      jest.useRealTimers();
    }
  });
});
