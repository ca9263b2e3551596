import { LockLostError } from './errors/lock-lost.error';

/**
 * `withLock`'s ending: runs `run` and releases `handle`, whatever happens. `run`'s error
 * passes through unchanged (after a release whose own failure is ignored). After a success, a
 * lease lost meanwhile rejects with `LockLostError`; any other failure to release is only
 * reported to `unconfirmed`: the work finished inside its lease, and the lease runs out by
 * itself (the handle's signal aborts then).
 */
export async function runThenRelease<T>(
  handle: { readonly released: boolean; release(): Promise<unknown> },
  run: () => Promise<T>,
  unconfirmed: (error: unknown) => void,
): Promise<T> {
  let result: T;
  try {
    result = await run();
  } catch (error) {
    if (!handle.released) await handle.release().catch(() => undefined);
    throw error;
  }
  try {
    await handle.release();
  } catch (error) {
    if (error instanceof LockLostError) throw error;
    unconfirmed(error);
  }
  return result;
}
