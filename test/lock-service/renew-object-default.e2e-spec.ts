import { LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

// docs/options.md: a call's `renew` object renews unless it says `enabled: false`, for acquire
// too (whose default without one is no renewal).
describe("acquire's renew object", () => {
  const kit = LockTestKit.forSuite();

  it.each([
    ['without enabled renews', { intervalRatio: 0.5 }, false],
    ['with enabled: undefined renews', { enabled: undefined, intervalRatio: 0.5 }, false],
    ['with enabled: false does not', { enabled: false, intervalRatio: 0.5 }, true],
  ])('%s', async (_name, renew, lostAfterItsLease) => {
    const locks = await kit.service();
    const handle = await locks.acquire('renew-object', { ttlMs: 1_000, renew });
    await sleep(1_500);
    const lost = handle.lost;
    await handle.release().catch(() => undefined);
    expect(lost).toBe(lostAfterItsLease);
  });
});
