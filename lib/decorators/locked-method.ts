import { Logger } from '@nestjs/common';
import { isObservable, Observable, throwError } from 'rxjs';
import { MongoLockError } from '../errors';
import { NEST_CONTROLLER_WATERMARK } from '../mongo-lock.constants';
import { MESSAGES } from '../mongo-lock.messages';
import { isAsyncIterable, isThenable } from '../util/value-kinds';
import { httpOnlyPlaceholders, type LockKeyContext } from '../keys/key-template';
import type { AnyMethod } from './decorated-places';
import {
  documentLockContext,
  interceptedCall,
  isRequestScopedController,
  isBoundSoon,
  lockBindingOf,
  lockedByInterceptor,
  type RequestParts,
  routeBodies,
  routeBodyOf,
} from './lock-bindings';
import type { LockedMetadata } from './locked-metadata';
import { lockedObservable } from './locked-observable';
import { runLocked, SKIPPED } from './locked-run';

const logger = new Logger('MongoLockModule');

/** The parts of a route's key context that come from its request. */
function requestPartsOf(context: LockKeyContext | undefined): RequestParts | undefined {
  if (!context) return undefined;
  const { type, params, query, body, user, headers } = context;
  return { type, params, query, body, user, headers };
}

/** The arguments with the current document handle at the method's `@LockedDoc()` positions. */
function withDocumentHandle(metadata: LockedMetadata, args: unknown[]): unknown[] {
  const indexes = metadata.document?.handleParams ?? [];
  if (indexes.length === 0) return args;
  const handle = documentLockContext.getStore();
  const given = [...args];
  for (const index of indexes) given[index] = handle;
  return given;
}

/**
 * Builds the function that replaces a `@Locked` method. The body runs:
 * - as is under `LockedInterceptor`, which holds the lock already;
 * - on an instance `LockedMethodsExplorer` bound to a `LockService` (a provider, or a controller
 *   whose method was called other than as its route: by a scheduler, through `this`): under
 *   `runLocked` (`lockedObservable` if declared Observable), or unlocked with the module's
 *   `enabled: false` (still a Promise, unless declared Observable); a key needing the request
 *   fails that call;
 * - as is on a controller Nest did not create (`new` in a unit test): no application's;
 * - otherwise (a provider Nest did not create, request-scoped, before init) not at all: it
 *   fails with `MongoLockError` rather than run unlocked.
 */
export function createLockedMethod(original: AnyMethod, metadata: LockedMetadata): AnyMethod {
  const { where, className, methodName } = metadata;
  const returnsObservable = metadata.returns === 'observable';
  // Each kind of mistake is warned of once per method: an Observable, a value not awaitable, or
  // an async iterable read after the release.
  const warned = new Set<string>();
  const warnOnce = (kind: 'observable' | 'value' | 'iterable', message: string) => {
    if (warned.has(kind)) return;
    warned.add(kind);
    logger.warn(message);
  };
  // Outside its route a call has arguments, not a request.
  const [requestPlaceholder] = httpOnlyPlaceholders(metadata.templates ?? []);

  return function lockedMethod(this: unknown, ...args: unknown[]): unknown {
    const intercepted = interceptedCall(metadata);
    if (intercepted) {
      const request = requestPartsOf(intercepted.keyContext);
      // Outside the mark, so nested calls lock normally; in the route body, for a `super` call.
      const asBody = <R>(run: () => R): R =>
        lockedByInterceptor.exit(() =>
          request ? routeBodies.run({ instance: this, metadata, request }, run) : run(),
        );
      const result = asBody(() => intercepted.enter(() => original.apply(this, args)));
      // Nest subscribes to it under our mark: its work runs outside the mark, as the body's does.
      return isObservable(result)
        ? new Observable((subscriber) => asBody(() => result.subscribe(subscriber)))
        : result;
    }
    // Fail the way the method reports failures: a rejected Promise or an erroring Observable.
    const fail = (error: Error) =>
      returnsObservable ? throwError(() => error) : Promise.reject(error);
    const binding = lockBindingOf(this);
    if (!binding) {
      const type = (this as { constructor?: unknown } | null | undefined)?.constructor;
      if (isRequestScopedController(type)) {
        return fail(new MongoLockError(MESSAGES.requestScopedControllerOutsideRoute(where)));
      }
      // A controller Nest did not make (`new` in a unit test) belongs to no application: as is.
      const isController =
        typeof type === 'function' && Reflect.getMetadata(NEST_CONTROLLER_WATERMARK, type) === true;
      const soon = isBoundSoon(this as object);
      if (isController && !soon) return original.apply(this, args);
      const message = soon ? MESSAGES.calledBeforeInit(where) : MESSAGES.unboundInstance(where);
      return fail(new MongoLockError(message));
    }
    const run = () => original.apply(this, withDocumentHandle(metadata, args));
    // No lock, so no document handle: `@LockedDoc()` positions get undefined, not the caller's.
    // Still the shape a locked call has: a Promise, unless declared Observable.
    if (!binding.enabled)
      return returnsObservable ? run() : new Promise((resolve) => resolve(run()));
    // A `super` call from a route's body: its keys read the route's request.
    const route = requestPlaceholder ? routeBodyOf(this, metadata) : undefined;
    if (requestPlaceholder && !route) {
      const { template, placeholder } = requestPlaceholder;
      return fail(new MongoLockError(MESSAGES.calledOutsideRoute(where, template, placeholder)));
    }

    let keys: string[];
    let scope: string | undefined;
    try {
      // The instance's class, not the one that declared the method: subclasses lock apart. Bound,
      // so an instance Nest made (decoration refused static methods).
      const called = { className: (this as object).constructor.name || className, methodName };
      const keyContext = { type: 'method', ...route?.request, args, ...called };
      keys = metadata.resolveKeys(keyContext);
      scope = metadata.resolveScope?.(keyContext);
    } catch (error) {
      return fail(error as Error);
    }

    if (returnsObservable) {
      const source = () => {
        const result = run();
        if (isObservable(result)) return result;
        return throwError(() => new MongoLockError(MESSAGES.observableExpected(where)));
      };
      return lockedObservable(binding.service, keys, metadata, source, {}, scope);
    }
    const work = async () => {
      const result = run();
      if (isObservable(result)) warnOnce('observable', MESSAGES.observableWithoutType(where));
      // Start-up refuses known synchronous provider methods; this catches the rest.
      else if (!isThenable(result) && !isAsyncIterable(result)) {
        warnOnce('value', MESSAGES.unawaitableResult(where));
      }
      const value: unknown = await result;
      if (isObservable(value)) warnOnce('observable', MESSAGES.observableInPromise(where));
      // Read by the caller after the release: a cursor's batches are fetched unlocked.
      else if (isAsyncIterable(value)) warnOnce('iterable', MESSAGES.iterableResult(where));
      return value;
    };
    return runLocked(binding.service, keys, metadata, work, undefined, scope).then((outcome) =>
      outcome === SKIPPED ? undefined : outcome,
    );
  };
}
