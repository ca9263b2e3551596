import { LockTestKit } from './lock-test-kit';

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
        const waiting = b.acquire('fake-immediate', { ttlMs: 10_000, timeoutMs: 5_000 });
        await new Promise((resolve) => setTimeout(resolve, 50));
        const releasedAt = performance.now();
        await held.release();
        const next = await waiting;
        // A waiter's own timer would take a third of its lease (over 3 s); the event, milliseconds.
        expect(performance.now() - releasedAt).toBeLessThan(1_000);
        await next.release();
      }
    } finally {
      jest.useRealTimers();
    }
  });
});
