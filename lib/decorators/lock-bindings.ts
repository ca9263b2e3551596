import { AsyncLocalStorage } from 'node:async_hooks';
import type { LockService } from '../lock.service';
import type { LockedMetadata } from './locked-metadata';

/**
 * Which application's LockService locks a provider instance. Keyed by instance, not class, so
 * two applications in one process (two test apps, say) each lock with their own service.
 */
const serviceByInstance = new WeakMap<object, LockService>();

/** Binds a provider instance to its application's service; false if already bound to another. */
export function bindLockService(instance: object, service: LockService): boolean {
  const bound = serviceByInstance.get(instance);
  if (bound && bound !== service) return false;
  serviceByInstance.set(instance, service);
  return true;
}

export function boundLockService(instance: unknown): LockService | undefined {
  return typeof instance === 'object' && instance !== null
    ? serviceByInstance.get(instance)
    : undefined;
}

/**
 * Set by `LockedInterceptor` around the handler call it has already locked, so that the
 * method's own wrapper runs it as is: a handler is locked exactly once.
 */
const lockedByInterceptor = new AsyncLocalStorage<LockedMetadata>();

export function runLockedByInterceptor<T>(metadata: LockedMetadata, run: () => T): T {
  return lockedByInterceptor.run(metadata, run);
}

/** Whether the interceptor has locked this method's current call (and hands it over once). */
export function isLockedByInterceptor(metadata: LockedMetadata): boolean {
  return lockedByInterceptor.getStore() === metadata;
}

/** Runs the method body without the interceptor's mark, so nested calls lock normally. */
export function withoutInterceptorMark<T>(run: () => T): T {
  return lockedByInterceptor.exit(run);
}
