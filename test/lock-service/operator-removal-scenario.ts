// One scenario for forceRelease and releaseScope: an operator in instance A removes the entry
// that B's call of several keys holds on one key while it waits for the other; C waits on that
// key and takes it. B must take the key again behind C, never be handed the removed entry.
import type { LockHandle } from '../../lib/lock-handle';
import type { AcquireOptions } from '../../lib/interfaces/lock-options.interface';
import type { LockService } from '../../lib';
import { eventually, type LockTestKit } from './lock-test-kit';

export async function removedWhileTakingSeveralKeys(
  kit: LockTestKit,
  prefix: string,
  bOptions: AcquireOptions,
  remove: (operator: LockService, key: string) => Promise<unknown>,
): Promise<void> {
  const [k, z] = [`${prefix}:k`, `${prefix}:z`];
  const a = await kit.service({ holderId: 'A' });
  const b = await kit.service({ holderId: 'B' });
  const c = await kit.service({ holderId: 'C' });
  const other = await a.acquire(z, { ttlMs: 60_000 });
  // Keys are taken in sorted order: B holds k, then waits for z.
  const both = b.acquire([k, z], bOptions);
  await eventually(async () => (await a.inspect(k))?.holderId === 'B');
  await eventually(async () => (await a.inspect(z))?.waiting === 1);
  const cWaits = c.acquire(k, { ttlMs: 60_000, timeoutMs: 15_000 });
  await eventually(async () => (await a.inspect(k))?.waiting === 1);
  // The operator is in A: B hears of it by the command's news only.
  await remove(a, k);
  const cHandle = await cWaits;
  let handed: LockHandle | undefined;
  void both.then(
    (handle) => (handed = handle),
    () => undefined,
  );
  await other.release();
  // B takes z, then k again: it waits behind C, and is handed nothing meanwhile.
  await eventually(async () => handed !== undefined || (await a.inspect(k))?.waiting === 1);
  expect(handed?.fences.get(k)).toBeUndefined();
  expect(cHandle.lost).toBe(false);
  await cHandle.release();
  const handle = await both;
  // Not the removed entry: C held the key in between.
  expect(handle.fences.get(k)).toBeGreaterThan(cHandle.fence);
  expect(await a.inspect(k)).toMatchObject({ holderId: 'B', fence: handle.fences.get(k) });
  await handle.release();
}
