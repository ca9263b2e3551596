import { AsyncLocalStorage } from 'node:async_hooks';
import { noop } from 'rxjs';
import { MongoLockError } from '../errors/mongo-lock.error';
import { MESSAGES } from '../mongo-lock.messages';
import { isThenable } from '../util/value-kinds';
import type { LockService } from '../lock.service';
import type { LockedMetadata } from './locked-metadata';

/** How a provider instance is locked: its application's service, and whether locks are on. */
export interface LockBinding {
  readonly service: LockService;
  /** False when the module was given `enabled: false`: `@Locked` methods run without a lock. */
  readonly enabled: boolean;
}

/**
 * Which application's LockService locks a provider instance. Keyed by instance, not class, so
 * two applications in one process (two test apps, say) each lock with their own service.
 */
const bindingByInstance = new WeakMap<object, LockBinding>();

/** Binds a provider instance to its application's service; false if already bound to another. */
export function bindLockService(instance: object, binding: LockBinding): boolean {
  const bound = bindingByInstance.get(instance);
  if (bound && bound.service !== binding.service) return false;
  bindingByInstance.set(instance, binding);
  return true;
}

export function lockBindingOf(instance: unknown): LockBinding | undefined {
  return typeof instance === 'object' && instance !== null
    ? bindingByInstance.get(instance)
    : undefined;
}

/**
 * `LockedInterceptor`'s mark on one handler call it has locked: whether Nest called the
 * handler, and its Promise, which no unsubscription can stop.
 */
export class InterceptedCall {
  /** Settles when the handler's Promise does; undefined until a handler returned one. */
  runs: Promise<void> | undefined;
  private called = false;
  private abandoned = false;

  constructor(readonly metadata: LockedMetadata) {}

  /** Runs the handler, unless its request ended first (it would run without the lock). */
  enter<T>(handler: () => T): T {
    if (this.abandoned)
      throw new MongoLockError(MESSAGES.handlerAfterRequestEnded(this.metadata.where));
    this.called = true;
    const result = handler();
    if (isThenable(result)) this.runs = Promise.resolve(result).then(noop, noop);
    return result;
  }

  /** The request stopped listening: a handler Nest has not called yet (an async pipe still ran) must never run. */
  leave(): void {
    if (!this.called) this.abandoned = true;
  }
}

/**
 * Set by `LockedInterceptor` around the handler call it has already locked, so that the
 * method's own wrapper runs it as is: a handler is locked exactly once.
 */
const lockedByInterceptor = new AsyncLocalStorage<InterceptedCall>();

export function runLockedByInterceptor<T>(call: InterceptedCall, run: () => T): T {
  return lockedByInterceptor.run(call, run);
}

/** The interceptor's mark if it has locked this method's current call (handed over once). */
export function interceptedCall(metadata: LockedMetadata): InterceptedCall | undefined {
  const call = lockedByInterceptor.getStore();
  return call?.metadata === metadata ? call : undefined;
}

/** Runs the method body without the interceptor's mark, so nested calls lock normally. */
export function withoutInterceptorMark<T>(run: () => T): T {
  return lockedByInterceptor.exit(run);
}
