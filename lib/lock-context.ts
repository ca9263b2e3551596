import { AsyncLocalStorage } from 'node:async_hooks';
import type { LockHandle } from './lock-handle';

interface HeldInContext {
  /** The service that acquired the handle: re-entrancy is per service (per lock collection). */
  readonly service: object;
  readonly handle: LockHandle;
}

const storage = new AsyncLocalStorage<readonly HeldInContext[]>();

/** Runs `fn` with `handle` added to the current async context's held locks. */
export function runWithHeldLock<T>(service: object, handle: LockHandle, fn: () => T): T {
  return storage.run([...(storage.getStore() ?? []), { service, handle }], fn);
}

export function innermostHeldLock(): LockHandle | undefined {
  return storage.getStore()?.findLast((entry) => !entry.handle.released)?.handle;
}

/**
 * The locks of `service` that the current async context holds, innermost first, and those it
 * lost (taken away by an operator too): a call re-entering one fails rather than take it anew.
 */
export function heldLocksOf(service: object): LockHandle[] {
  return (storage.getStore() ?? [])
    .filter((entry) => entry.service === service && (!entry.handle.released || entry.handle.lost))
    .map((entry) => entry.handle)
    .reverse();
}
