import { LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

// docs/options.md: `ttlMs` is "the lease" (what bounds how long a crashed holder keeps the key).
// With localHandOff (the default) a caller queued behind its process's entry takes it over with
// "the same token and lease" (docs/waiting.md); only a caller asking for a LONGER ttlMs makes
// the release write. So a caller asking for 2 s is handed a 30 s lease: should its process die
// now, other instances wait 30 s for the key, not the 2 s it asked for.
describe('a lock handed over within the process', () => {
  const kit = LockTestKit.forSuite();

  it('holds no longer than the ttlMs its caller asked for', async () => {
    const locks = await kit.service();
    const other = await kit.service();
    const first = await locks.acquire('handed-lease', { ttlMs: 30_000 });
    const ttlMs = 2_000;
    const second = locks.acquire('handed-lease', { ttlMs, timeoutMs: 10_000 });
    await sleep(20);
    await first.release(); // handed to the second caller without a write
    const handle = await second;
    const serverLeftMs = (await other.inspect('handed-lease'))?.remainingMs ?? 0;
    const localLeftMs = handle.expiresAt.getTime() - Date.now();
    await handle.release();
    expect(handle.fence).toBe(first.fence + 1n); // it was a hand-over
    expect(localLeftMs).toBeLessThanOrEqual(ttlMs);
    expect(serverLeftMs).toBeLessThanOrEqual(ttlMs);
  });
});
