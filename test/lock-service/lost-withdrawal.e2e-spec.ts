// A waiting process that leaves the line sends a withdrawal. When MongoDB does not answer it,
// the place would stay in line: the next release would grant the key to a process where
// nobody waits, and the real next waiter would wait for that grant's lease (5 s).
import { LockNotAcquiredError } from '../../lib/errors';
import { GRANT_LEASE_MS } from '../../lib/store/direct-grant';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { eventually, LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

describeWithFailPoints('a withdrawal MongoDB did not answer', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('is tried again: the next waiter is served at the release, not after a stale grant', async () => {
    const key = 'withdraw:lost';
    const holder = await kit.service();
    const leaver = await kit.service({ client: await appClient('leaver') });
    const next = await kit.service();
    const waitingCount = async () => (await holder.inspect(key))?.waiting;

    const held = await holder.acquire(key, { ttlMs: 30_000 });
    const leaving = leaver.acquire(key, { timeoutMs: 1_000 });
    await eventually(async () => (await waitingCount()) === 1);
    const waiting = next.acquire(key, { timeoutMs: 20_000 });
    await eventually(async () => (await waitingCount()) === 2);

    // The leaver's only `update` is its withdrawal (attempts are findAndModify). Two failures:
    // the driver retries a write once by itself.
    const firedBefore = await failPoint(
      { times: 2 },
      { failCommands: ['update'], appName: 'leaver', closeConnection: true },
    );
    await expect(leaving).rejects.toThrow(LockNotAcquiredError);
    await eventually(async () => (await waitingCount()) === 1, 5_000);
    expect(await failPoint('off')).toBe(firedBefore + 2);

    const releasedAt = performance.now();
    await held.release();
    const handle = await waiting;
    expect(performance.now() - releasedAt).toBeLessThan(GRANT_LEASE_MS / 5 + LOAD_SLACK_MS);
    await handle.release();
  });
});
