import { Logger } from '@nestjs/common';
import { canEmulate } from '../support/mongo';
import { eventually, LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

async function expectPollingHandOver(kit: LockTestKit, warn: jest.SpyInstance, extra = {}) {
  const holder = await kit.service(extra);
  const locks = await kit.service({ pollIntervalMs: 20, maxPollIntervalMs: 100, ...extra });
  const held = await holder.acquire('polled', { ttlMs: 60_000 });
  const waiters = [1, 2, 3].map(() => locks.withLock('polled', () => true, { timeoutMs: 20_000 }));
  await eventually(() => locks.diagnostics.waiters === 3);
  await held.release();
  expect(await Promise.all(waiters)).toEqual([true, true, true]);
  expect(locks.diagnostics.streamOpen).toBe(false);
  const other = await kit.service(extra);
  const again = await other.acquire('polled', { timeoutMs: 0 });
  const waiting = locks.acquire('polled', { timeoutMs: 20_000 });
  await again.release();
  await (await waiting).release();
  // Polling is how waiting works here (docs/waiting.md), not a fault: nothing is logged.
  expect(warn).not.toHaveBeenCalled();
}

describe('LockService without change streams', () => {
  let warn: jest.SpyInstance;
  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => warn.mockRestore());

  describe("changeStreams: 'off'", () => {
    const kit = LockTestKit.forSuite();

    it('polls with backoff and hands the lock over, logging nothing', async () => {
      await expectPollingHandOver(kit, warn, { changeStreams: 'off' });
    });
  });

  (canEmulate('standalone') ? describe : describe.skip)('a standalone server', () => {
    const kit = LockTestKit.forSuite({ standalone: true });

    it('falls back to polling and hands the lock over, logging nothing', async () => {
      await expectPollingHandOver(kit, warn);
    });
  });
});
