import { AsyncLocalStorage } from 'node:async_hooks';
import type { ClientSession } from 'mongodb';
import type { LockHandle } from './lock-handle';
import { isThenable } from './util/value-kinds';

interface HeldInContext {
  /** The service that acquired the handle: re-entrancy is per service (per lock collection). */
  readonly service: object;
  readonly handle: LockHandle;
  /** What `LockService.current()` gives: a re-entered call's view of `handle`, or `handle`. */
  readonly shown: LockHandle;
  /** Its function still runs (timers and promises it made outlive it in the context). */
  running: boolean;
}

const storage = new AsyncLocalStorage<readonly HeldInContext[]>();

/**
 * Runs `fn` with `handle` added to the current async context's held locks; `shown` is what
 * `LockService.current()` gives meanwhile (a re-entered call's view of `handle`).
 */
export function runWithHeldLock<T>(
  service: object,
  handle: LockHandle,
  fn: () => T,
  shown: LockHandle = handle,
): T {
  const entry: HeldInContext = { service, handle, shown, running: true };
  const ended = () => void (entry.running = false);
  return storage.run([...(storage.getStore() ?? []), entry], () => {
    let result: T;
    try {
      result = fn();
    } catch (error) {
      ended();
      throw error;
    }
    // Any thenable adopted here, inside the context: its work then runs with the lock in view.
    if (isThenable(result)) return Promise.resolve(result).finally(ended) as T;
    ended();
    return result;
  });
}

/**
 * Let go by its holder: released, or its release sent (`releaseUnderWay`, answered or not): the
 * key may be free on the server already, so nothing runs under it any more.
 */
export function letGo(handle: LockHandle): boolean {
  return handle.released || (handle as { releaseUnderWay?: boolean }).releaseUnderWay === true;
}

/** `LockService.current()`: as {@link heldLocksOf} sees re-entry, lost locks aside. */
export function innermostHeldLock(): LockHandle | undefined {
  return storage.getStore()?.findLast((entry) => entry.running && !letGo(entry.handle))?.shown;
}

/**
 * The session of a locked transaction (`transaction: true`, of any service) whose work runs in
 * the current async context, while it is open: a write made here without it is no part of it.
 */
export function openLockedTransaction(): ClientSession | undefined {
  const inTransaction = ({ handle, running }: HeldInContext) =>
    running && handle.session?.inTransaction() === true;
  return storage.getStore()?.findLast(inTransaction)?.handle.session;
}

/**
 * The locks of `service` that the current async context holds while their function runs,
 * innermost first, lost ones too (taken away by an operator as well): a call re-entering one
 * fails rather than take it anew. Once the function returned, or its holder let it go, its lock
 * is being released, maybe already free on the server: a call then locks the key as any would.
 */
export function heldLocksOf(service: object): LockHandle[] {
  const enclosing = ({ handle, running }: HeldInContext) =>
    running && (!letGo(handle) || handle.lost);
  return (storage.getStore() ?? [])
    .filter((entry) => entry.service === service && enclosing(entry))
    .map((entry) => entry.handle)
    .reverse();
}
