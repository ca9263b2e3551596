// Under Jest's `fakeTimers: { enableGlobally: true }` the library loads while fake timers are
// installed: anything of theirs it kept (a captured `process.nextTick` to defer leaves, say) would
// never run once the test goes back to real timers (`jest.useRealTimers()`, as to talk to a real
// MongoDB), and every release would hang.
jest.useFakeTimers();
// Loaded as under `enableGlobally`: after the fake timers are installed.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { LockTestKit } = require('./lock-test-kit') as typeof import('./lock-test-kit');
jest.useRealTimers();

jest.setTimeout(30_000);

describe('a release after going back to real timers', () => {
  const kit = LockTestKit.forSuite();

  it('is answered', async () => {
    const service = await kit.service({ holderId: 'A' });
    const handle = await service.acquire('fake-tick', { ttlMs: 10_000 });
    const released = await Promise.race([
      handle.release().then(() => 'released'),
      new Promise((resolve) => setTimeout(() => resolve('hung'), 5_000)),
    ]);
    expect(released).toBe('released');
  });
});
