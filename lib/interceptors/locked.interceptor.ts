import {
  BadRequestException,
  type CallHandler,
  type ExecutionContext,
  Injectable,
  Logger,
  type NestInterceptor,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { HttpAdapterHost, ModuleRef, Reflector } from '@nestjs/core';
import { defer, EMPTY, finalize, Observable, of, throwError } from 'rxjs';
import { InterceptedCall, interceptedCall, lockedByInterceptor } from '../decorators/lock-bindings';
import type { LockedMetadata } from '../decorators/locked-metadata';
import { type LockedObservableHooks, lockedObservable } from '../decorators/locked-observable';
import {
  DocumentNotFoundError,
  InvalidLockKeyError,
  InvalidLockOptionsError,
  LockLostError,
  LockNotAcquiredError,
  LockServiceClosedError,
  LockStoreUnavailableError,
  MongoLockError,
} from '../errors';
import { watchClientDeparture } from '../http/client-departure';
import { documentHttpError, httpError, retryAfterSecondsOf } from '../http/document-http-errors';
import {
  noteRefusalRetryAfter,
  removeHeaderIfUnsent,
  restoreRetryAfter,
  setHeaderIfUnsent,
} from '../http/response-headers';
import type { LockKeyContext } from '../keys/key-template';
import type { MongoLockModuleOptions } from '../interfaces/mongo-lock-options.interface';
import { LockService } from '../lock.service';
import { LOCKED_METADATA } from '../mongo-lock.constants';
import { MONGO_LOCK_OPTIONS } from '../mongo-lock.module-definition';
import { MESSAGES } from '../mongo-lock.messages';

/** Nest's `SSE_METADATA`: the same value in Nest 10 to 12, whose export moved between them. */
const SSE_METADATA = '__sse__';

/** Applications warned of a missing LockService, by their Reflector (one per application). */
const warnedOfMissingService = new WeakSet<Reflector>();

/**
 * Locks `@Locked` handlers for their call and the Observable they return; `@Locked` applies it,
 * you never register it yourself. Lock errors become HTTP errors (see
 * {@link LockedInterceptor.mapLockError}), typed errors on other transports; the handler's own
 * pass unchanged. With `onBusy: 'skip'` a busy handler does not run and the call yields
 * {@link LockedInterceptor.skippedResult}. With the module's `enabled: false`, handlers run
 * unlocked. Override the protected hooks in a subclass used through `createLockedDecorator()`.
 * @example
 * class PoliteLockedInterceptor extends LockedInterceptor {
 *   protected override retryAfterSeconds(error: LockNotAcquiredError) {
 *     return Math.max(5, super.retryAfterSeconds(error));
 *   }
 * }
 * export const Locked = createLockedDecorator(PoliteLockedInterceptor);
 */
@Injectable()
export class LockedInterceptor implements NestInterceptor, OnApplicationBootstrap {
  private lockService: LockService | undefined;
  private enabled: boolean | undefined;

  constructor(
    protected readonly reflector: Reflector,
    protected readonly moduleRef: ModuleRef,
    @Optional() protected readonly adapterHost?: HttpAdapterHost,
  ) {}

  /**
   * Nest makes this interceptor wherever `@Locked` is used: without a LockService every locked
   * call would fail, so say so at start-up, once per application. Not a failure: a unit test may
   * compile a controller without the module and never call its locked routes.
   */
  onApplicationBootstrap(): void {
    if (warnedOfMissingService.has(this.reflector)) return;
    try {
      this.getLockService();
    } catch {
      warnedOfMissingService.add(this.reflector);
      new Logger('MongoLockModule').warn(MESSAGES.serviceMissingAtStart());
    }
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const metadata = this.reflector.get<LockedMetadata | undefined>(
      LOCKED_METADATA,
      context.getHandler(),
    );
    // Also registered globally, or twice: the outer one holds the lock already.
    if (!metadata || interceptedCall(metadata)) return next.handle();
    // One mark per run (an outer retry() runs the handler again): what the handler started is
    // waited for before the lock ends, even after an outer interceptor stopped listening.
    let call: InterceptedCall | undefined;
    // What the keys were made of, for a `super` call of the handler (`routeBodies`).
    let keyContext: LockKeyContext | undefined;
    const handle = () => {
      const marked = (call = new InterceptedCall(metadata, keyContext));
      // Subscribed under the mark too: an interceptor inside ours that defers `next.handle()`
      // (`@VersionETag`'s) calls the handler at subscription.
      return new Observable<unknown>((subscriber) =>
        lockedByInterceptor.run(marked, () => next.handle().subscribe(subscriber)),
      );
    };
    if (!this.locksEnabled()) return handle();
    let keys: string[];
    let scope: string | undefined;
    try {
      keyContext = this.keyContext(context, metadata);
      keys = metadata.resolveKeys(keyContext);
      scope = metadata.resolveScope?.(keyContext);
    } catch (error) {
      return throwError(() => this.mapLockError(error, context));
    }
    // Nest stops listening when a client leaves only on @Sse routes: a request waiting for its
    // lock watches its client itself, and leaves the line when it goes.
    return defer(() => {
      // An outer retry() runs us again: the attempt before's `Retry-After` is not this one's.
      if (context.getType() === 'http') restoreRetryAfter(this.adapterHost, context);
      // An `HttpException`: Nest does not log it.
      const departure = watchClientDeparture(context, () =>
        httpError(499, MESSAGES.clientLeftWhileWaiting(metadata.where)),
      );
      const hooks: LockedObservableHooks<unknown> = {
        mapLockError: (error) => this.mapLockError(error, context),
        skipped: () => {
          const result = this.skippedResult(context, metadata);
          // An empty body on other routes; on @Sse ones, `undefined` would be an empty event.
          const isSse =
            context.getType() === 'http' &&
            Reflect.getMetadata(SSE_METADATA, context.getHandler()) === true;
          return result === undefined && isSse ? EMPTY : of(result);
        },
        // Nest unsubscribes from a handler's Observable when its client goes away.
        abortTransactionOnUnsubscribe: true,
        workInFlight: () => call?.runs,
        unsubscribed: () => call?.leave(),
        waitSignal: departure?.signal,
      };
      return lockedObservable(this.getLockService(), keys, metadata, handle, hooks, scope).pipe(
        finalize(() => departure?.stop()),
      );
    });
  }

  /**
   * What a handler with `onBusy: 'skip'` yields when busy. Default `undefined`: on HTTP, the
   * route's success status (`@HttpCode`, else 200, 201 for POST) with an empty body; on an
   * `@Sse()` route, a stream that ends without an event.
   */
  protected skippedResult(_context: ExecutionContext, _metadata: LockedMetadata): unknown {
    return undefined;
  }

  /** The values key templates and key functions read. HTTP adds the request's parts. */
  protected keyContext(context: ExecutionContext, metadata: LockedMetadata): LockKeyContext {
    const base: LockKeyContext = {
      type: context.getType(),
      args: context.getArgs(),
      // The controller's class, not the one that declared an inherited handler.
      className: context.getClass().name || metadata.className,
      methodName: metadata.methodName,
    };
    if (context.getType() !== 'http') return base;
    const request = context.switchToHttp().getRequest<Partial<LockKeyContext>>();
    const { params, query, body, user, headers } = request;
    return { ...base, params, query, body, user, headers };
  }

  /**
   * Maps an error of the lock itself (taking it, or finishing it after the handler), never the
   * handler's, to the HTTP answers of docs/http.md (423, 400, 404, 503); other transports:
   * unchanged. Drops an `ETag` set inside the lock: the version may never have been written.
   */
  protected mapLockError(error: unknown, context: ExecutionContext): unknown {
    if (context.getType() !== 'http') return error;
    removeHeaderIfUnsent(this.adapterHost, context, 'ETag');
    if (error instanceof LockNotAcquiredError) {
      const seconds = this.retryAfterSeconds(error);
      noteRefusalRetryAfter(context);
      this.setResponseHeader(context, 'Retry-After', String(seconds));
      return this.toLockedException(error, seconds);
    }
    if (error instanceof InvalidLockKeyError) return this.toInvalidKeyException(error);
    if (error instanceof DocumentNotFoundError || error instanceof InvalidLockOptionsError) {
      return documentHttpError(error, undefined)?.exception ?? error;
    }
    if (
      error instanceof LockStoreUnavailableError ||
      error instanceof LockServiceClosedError ||
      error instanceof LockLostError
    ) {
      const seconds = this.unavailableRetryAfterSeconds(error);
      noteRefusalRetryAfter(context);
      this.setResponseHeader(context, 'Retry-After', String(seconds));
      return this.toUnavailableException(error, seconds);
    }
    return error;
  }

  /** Whole seconds until the holder's lease ends, at least 1 (as the document routes answer). */
  protected retryAfterSeconds(error: LockNotAcquiredError): number {
    return retryAfterSecondsOf(error.retryAfterMs);
  }

  /** Whole seconds a client should wait when the lock store is unavailable. Default 1. */
  protected unavailableRetryAfterSeconds(_error: MongoLockError): number {
    return 1;
  }

  protected toUnavailableException(error: MongoLockError, retryAfterSeconds: number): unknown {
    return httpError(503, MESSAGES.unavailable(retryAfterSeconds), error);
  }

  protected toLockedException(error: LockNotAcquiredError, retryAfterSeconds: number): unknown {
    return httpError(423, MESSAGES.locked(retryAfterSeconds), error);
  }

  /** `400 Bad Request`; the message says which placeholder of the template was missing or bad. */
  protected toInvalidKeyException(error: InvalidLockKeyError): unknown {
    const body = { statusCode: 400, message: error.message, error: 'Bad Request' };
    // Spelled out so every Nest version and adapter gives this shape; still a BadRequestException.
    return new BadRequestException(body, { cause: error });
  }

  /** Sets a header through the HTTP adapter (Express or Fastify), unless the response went out. */
  protected setResponseHeader(context: ExecutionContext, name: string, value: string): void {
    setHeaderIfUnsent(this.adapterHost, context, name, value);
  }

  /** The application's LockService, found across modules so feature modules need no import. */
  protected getLockService(): LockService {
    if (this.lockService) return this.lockService;
    try {
      this.lockService = this.moduleRef.get<LockService>(LockService, { strict: false });
      return this.lockService;
    } catch (error) {
      throw new MongoLockError(MESSAGES.serviceMissing(), { cause: error });
    }
  }

  /** False when the module was given `enabled: false`: handlers then run without a lock. */
  protected locksEnabled(): boolean {
    if (this.enabled !== undefined) return this.enabled;
    try {
      const options = this.moduleRef.get<MongoLockModuleOptions>(MONGO_LOCK_OPTIONS, {
        strict: false,
      });
      this.enabled = options.enabled !== false;
    } catch {
      this.enabled = true; // no module: getLockService() says so
    }
    return this.enabled;
  }
}
