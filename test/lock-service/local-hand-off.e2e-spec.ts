// `localHandOff`: whether a released lock goes straight to a caller waiting in the same
// process, or through the line in the lock document as between processes.
import { InvalidLockOptionsError } from '../../lib/errors';
import { FENCES_PER_LEASE } from '../../lib/store/direct-grant';
import { countCommands, eventually, LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

const kit = LockTestKit.forSuite();

/** Two callers of one service take turns on a key; the commands the hand-off cost. */
async function handOff(localHandOff: boolean | undefined) {
  const client = await kit.client({ monitorCommands: true });
  const commands = countCommands(client);
  const locks = await kit.service({
    client,
    ...(localHandOff === undefined ? {} : { localHandOff }),
  });
  const key = `local:${String(localHandOff)}`;
  const first = await locks.acquire(key, { ttlMs: 10_000 });
  const waiting = locks.acquire(key, { ttlMs: 10_000, timeoutMs: 10_000 });
  await eventually(() => locks.diagnostics.waiters === 1);
  await eventually(async () => (await locks.inspect(key))?.waiting === 1, 3_000);
  commands.reset();
  await first.release();
  const second = await waiting;
  const writes = commands.names.filter((name) => name !== 'getMore');
  await second.release();
  return { step: second.fence - first.fence, writes };
}

describe('localHandOff', () => {
  it('on (the default): the next caller here gets the lock within the lease, without a write', async () => {
    const { step, writes } = await handOff(undefined);
    expect(step).toBe(1n); // the next fence of the lease's block
    expect(writes).toEqual([]);
  });

  it('off: the hand-off goes through the lock document, as between processes', async () => {
    const { step, writes } = await handOff(false);
    // A new lease by the store: past the released lease's block of fences.
    expect(step).toBeGreaterThanOrEqual(BigInt(FENCES_PER_LEASE));
    expect(writes.length).toBeGreaterThanOrEqual(2); // the release, then the waiter's write
  });

  it('must be a boolean', async () => {
    await expect(kit.service({ localHandOff: 'no' as unknown as boolean })).rejects.toThrow(
      InvalidLockOptionsError,
    );
  });
});
