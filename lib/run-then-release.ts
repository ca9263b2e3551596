import { LockLostError } from './errors/lock-lost.error';

/**
 * `withLock`'s ending: runs `run`, then releases. `run`'s error passes through (a release failure
 * then is ignored). After success, a lost lease rejects with `LockLostError`, unless `committed`
 * says a transaction proved the lock ours when the work committed; other release failures only
 * go to `unconfirmed`: the work finished inside its lease, which runs out by itself.
 */
export async function runThenRelease<T>(
  handle: { readonly released: boolean; release(): Promise<unknown> },
  run: () => Promise<T>,
  unconfirmed: (error: unknown) => void,
  committed: () => boolean = () => false,
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
    if (error instanceof LockLostError && !committed()) throw error;
    unconfirmed(error);
  }
  return result;
}
