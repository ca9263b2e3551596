import { LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

// lib/interfaces/mongo-lock-options.interface.ts, LockRenewalOptions.enabled (also a call's
// `renew` object): "Default `true` for `withLock` and `@Locked`, `false` for `acquire`". A call's
// `renew: { intervalRatio }`, or `renew: { enabled: undefined }`, turns renewal on for acquire
// (resolveRenewOption defaults enabled to true): the lock is renewed until maxHoldMs unless
// released. Either the code or that JSDoc (and docs/options.md's `renew`) is wrong.
describe("acquire's renew object without enabled", () => {
  const kit = LockTestKit.forSuite();

  it("keeps acquire's default (no renewal), as the JSDoc says", async () => {
    const locks = await kit.service();
    const handle = await locks.acquire('renew-object', {
      ttlMs: 1_000,
      renew: { enabled: undefined, intervalRatio: 0.5 },
    });
    await sleep(1_500);
    const lost = handle.lost;
    await handle.release().catch(() => undefined);
    expect(lost).toBe(true);
  });
});
