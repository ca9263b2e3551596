import { AsyncLocalStorage } from 'node:async_hooks';
import { noop } from 'rxjs';
import { MongoLockError } from '../errors/mongo-lock.error';
import { MESSAGES } from '../mongo-lock.messages';
import { isThenable } from '../util/value-kinds';
import type { DocumentLockHandle } from '../documents/document-lock-handle';
import type { LockService } from '../lock.service';
import type { LockKeyContext } from '../keys/key-template';
import type { LockedMetadata } from './locked-metadata';

interface LockBinding {
  readonly service: LockService;
  /** False when the module was given `enabled: false`: `@Locked` methods run without a lock. */
  readonly enabled: boolean;
}

// By instance, not class: two applications in one process (test apps) each use their own service.
const bindingByInstance = new WeakMap<object, LockBinding>();

/** Binds a provider instance to its application's service; false if already bound to another. */
export function bindLockService(instance: object, binding: LockBinding): boolean {
  const bound = bindingByInstance.get(instance);
  if (bound && bound.service !== binding.service) return false;
  bindingByInstance.set(instance, binding);
  return true;
}

/**
 * Explorers made but not initialised yet, each asked whether Nest made an instance it will bind:
 * such a controller called before then (its own `onModuleInit`) fails as a provider does, not
 * run as one made with `new`. Weak: a testing module compiled and never initialised is dropped.
 */
const awaitingInit = new Set<WeakRef<{ willBind(instance: object): boolean }>>();

/** Registers an explorer until its init; returns the call that unregisters it. */
export function bindingSoon(explorer: { willBind(instance: object): boolean }): () => void {
  const ref = new WeakRef(explorer);
  awaitingInit.add(ref);
  return () => awaitingInit.delete(ref);
}

/** Whether an explorer not initialised yet will bind `instance`. */
export function isBoundSoon(instance: object): boolean {
  for (const ref of awaitingInit) {
    const explorer = ref.deref();
    if (!explorer) awaitingInit.delete(ref);
    else if (explorer.willBind(instance)) return true;
  }
  return false;
}

// Classes, as their instances are made per request and never bound: a call of theirs that is not
// a route's fails (it cannot be locked), where an unbound controller made with `new` runs as is.
const requestScopedControllers = new WeakSet<object>();

/** Marks a controller class an application makes per request (or per durable context). */
export function markRequestScopedController(type: object): void {
  requestScopedControllers.add(type);
}

export function isRequestScopedController(type: unknown): boolean {
  return requestScopedControllers.has(type as object);
}

/** `WeakMap.get` answers `undefined` for a non-object `this` (a function called unbound). */
export function lockBindingOf(instance: unknown): LockBinding | undefined {
  return bindingByInstance.get(instance as object);
}

/** `LockedInterceptor`'s mark on a handler call it locked: was it called, and its Promise. */
export class InterceptedCall {
  /**
   * Settles when every Promise the handler returned has (an inner interceptor may call it more
   * than once: a retry after a timeout leaves the first call running); undefined until one.
   */
  runs: Promise<void> | undefined;
  private called = false;
  private abandoned = false;

  constructor(
    readonly metadata: LockedMetadata,
    /** The request's values the route's keys were made of (none with `enabled: false`). */
    readonly keyContext?: LockKeyContext,
  ) {}

  /** Runs the handler, unless its request ended first (it would run without the lock). */
  enter<T>(handler: () => T): T {
    if (this.abandoned)
      throw new MongoLockError(MESSAGES.handlerAfterRequestEnded(this.metadata.where));
    this.called = true;
    const result = handler();
    if (!isThenable(result)) return result;
    // Adopted once, and that Promise handed on: a lazy thenable (a Mongoose query) runs its work
    // at every `then`.
    const settled = Promise.resolve(result);
    const earlier = this.runs;
    this.runs = Promise.all([earlier, settled.then(noop, noop)]).then(noop);
    return settled as T;
  }

  /** The request stopped listening: a handler not called yet (async pipe) must never run. */
  leave(): void {
    if (!this.called) this.abandoned = true;
  }
}

/**
 * Set around a handler call the interceptor locked, so the wrapper runs it as is: locked once.
 * The wrapper runs the body outside it (`exit`), so nested calls lock normally.
 */
export const lockedByInterceptor = new AsyncLocalStorage<InterceptedCall>();

/** The request's parts of a route's key context: what a method reading the request needs. */
export type RequestParts = Pick<
  LockKeyContext,
  'type' | 'params' | 'query' | 'body' | 'user' | 'headers'
>;

/** A route's handler body running under the interceptor's lock. */
interface RouteBody {
  readonly instance: unknown;
  readonly metadata: LockedMetadata;
  /** Not the transport's arguments (`req`, `res`): kept by whatever the body leaves running. */
  readonly request: RequestParts;
}

/**
 * Set around a route's body: the `@Locked` method it overrides, called in it on the same instance
 * (`super.pay(id)`), reads the route's request when its keys need one (`{params.id}`); its
 * arguments are its own.
 */
export const routeBodies = new AsyncLocalStorage<RouteBody>();

/**
 * The route body this call is a `super` call from: same instance and method name, another
 * `@Locked` declaration (the route calling itself again is a call of its own).
 */
export function routeBodyOf(instance: unknown, metadata: LockedMetadata): RouteBody | undefined {
  const body = routeBodies.getStore();
  if (!body || body.instance !== instance || body.metadata === metadata) return undefined;
  return body.metadata.methodName === metadata.methodName ? body : undefined;
}

/** The interceptor's mark if it has locked this method's current call (handed over once). */
export function interceptedCall(metadata: LockedMetadata): InterceptedCall | undefined {
  const call = lockedByInterceptor.getStore();
  return call?.metadata === metadata ? call : undefined;
}

/** The innermost `@LockedDocument` handle (still given after a `commit`), or `undefined`. */
export const documentLockContext = new AsyncLocalStorage<DocumentLockHandle>();
