import type { CommandStartedEvent } from 'mongodb';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(300_000);

const MONITORING = new Set(['hello', 'isMaster', 'ismaster', 'ping', 'getMore']);

describe('releaseAllHeld with many shared holders of one key', () => {
  const kit = LockTestKit.forSuite();

  it('releases 1,000 shared holders of one key together, not one command each', async () => {
    const client = await kit.client({ monitorCommands: true });
    const locks = await kit.service({ client });
    const handles = [];
    // Joined in batches, as concurrent callers would.
    for (let i = 0; i < 1000; i += 50) {
      handles.push(
        ...(await Promise.all(
          Array.from({ length: 50 }, () =>
            locks.acquire('many', { mode: 'shared', ttlMs: 120_000 }),
          ),
        )),
      );
    }
    let commands = 0;
    client.on('commandStarted', (event: CommandStartedEvent) => {
      if (!MONITORING.has(event.commandName)) commands += 1;
    });
    // One command each rewrote a line of up to 1,000 entries: past the 5 s bound here.
    await expect(locks.releaseAllHeld()).resolves.toBe(1000);
    expect(handles.every((handle) => handle.released && handle.signal.aborted)).toBe(true);
    expect(commands).toBeLessThanOrEqual(5);
    const state = await locks.inspect('many');
    expect(state?.held).toBe(false);
    expect(state?.holders).toEqual([]);
  });
});
