import type { LockHandle, LockService } from '../../lib';
import { eventually } from './lock-test-kit';

/**
 * `b` asks for `key` again right after a release (so it loops on it here), then gets it after
 * waiting behind `a`: its release with nobody queued keeps the entry.
 */
export async function heldInLoop(
  a: LockService,
  b: LockService,
  key: string,
  line: (key: string) => Promise<string[]>,
): Promise<LockHandle> {
  const first = await b.acquire(key);
  const fromA = a.acquire(key, { timeoutMs: 20_000 });
  await eventually(async () => (await line(key)).length === 2);
  await first.release();
  // Asked within the turn of its release's reply: a loop.
  const fromB = b.acquire(key, { timeoutMs: 20_000 });
  await eventually(async () => (await line(key)).length === 2);
  await (await fromA).release();
  return fromB;
}
