import type { WithLockOptions } from '../interfaces/lock-options.interface';
import type { LockKeyContext, LockKeyResolver } from '../keys/key-template';
import { LOCKED_METADATA } from '../mongo-lock.constants';

/**
 * Options of `@Locked`: those of `withLock` but `signal` (the call's lifetime is the signal) and
 * `metricsLabel`, plus busy handling, a minimum hold and a per-call owner scope.
 */
export interface LockedOptions extends Pick<
  WithLockOptions,
  'ttlMs' | 'timeoutMs' | 'renew' | 'transaction' | 'mode' | 'permits' | 'weight'
> {
  /**
   * When the lock is held elsewhere: `'wait'` (default) up to `timeoutMs`, then throw
   * `LockNotAcquiredError` (HTTP 423); `'skip'`: do not run the method (a Promise resolves to
   * `undefined`, an Observable completes empty, HTTP answers its success status with an empty
   * body), logged at debug level, with one attempt unless `timeoutMs` is given.
   */
  onBusy?: 'wait' | 'skip';
  /**
   * Keep the lock at least this many ms after it was taken, success or failure: the lease is left
   * to run out instead of released, so a scheduled job runs once per period across instances
   * (ShedLock's `lockAtLeastFor`). Default 0.
   */
  minHoldMs?: number;
  /** Each call's owner scope (`LockService.releaseScope`): a key-like template, or a function. */
  scope?: string | ((context: LockKeyContext) => string);
}

/**
 * What the decorated method returns, as told when decorated: `promise` (`async` or declared
 * `Promise`), `observable` (declared `Observable`), `value` (anything else: not awaitable), or
 * `unknown` (the compiler emitted no type metadata).
 */
export type LockedMethodReturn = 'promise' | 'observable' | 'value' | 'unknown';

/** What `@LockedDocument` adds: which registered collection, and how to lock the document. */
export interface LockedDocumentTarget {
  /** The `forFeature()` name of the collection's `DocumentLocks`. */
  readonly name: string;
  readonly where?: Record<string, unknown>;
  readonly createIfMissing?: Record<string, unknown>;
  /** Indexes of the method's `@LockedDoc()` parameters (filled on provider-method calls). */
  readonly handleParams: readonly number[];
}

/** What `@Locked` records on a method. One object per decorated method, also its identity. */
export interface LockedMetadata {
  readonly className: string;
  readonly methodName: string;
  /** `Class.method`, for messages. */
  readonly where: string;
  /** Renders the call's keys (the compiled key templates or function). @internal */
  readonly resolveKeys: LockKeyResolver;
  /** Renders the owner scope (`LockedOptions.scope`) of a call, when the method has one. */
  readonly resolveScope?: (context: LockKeyContext) => string;
  /** `lock.template` of metrics and spans: the key templates, or `Class.method` for a function. */
  readonly metricsLabel: string;
  /** The key, id and scope templates as written (not key functions), for start-up checks. */
  readonly templates?: readonly string[];
  readonly options: LockedOptions;
  readonly returns: LockedMethodReturn;
  /** Set by `@LockedDocument`: `resolveKeys` renders a document id, not lock keys. @internal */
  readonly document?: LockedDocumentTarget;
}

/** Reads `@Locked` metadata from a method (its own or copied from the function it wraps). */
export function getLockedMetadata(method: unknown): LockedMetadata | undefined {
  if (typeof method !== 'function') return undefined;
  return Reflect.getMetadata(LOCKED_METADATA, method) as LockedMetadata | undefined;
}
