import type { WithLockOptions } from '../interfaces/lock-options.interface';
import type { LockKeyContext, LockKeyResolver } from '../keys/key-template';
import { LOCKED_METADATA } from '../mongo-lock.constants';

/**
 * Options of `@Locked`: a subset of `AcquireOptions` (no `signal`: the call's lifetime is the
 * signal), plus what to do when the lock is busy and how long to hold it at least.
 */
export interface LockedOptions extends Pick<
  WithLockOptions,
  'ttlMs' | 'timeoutMs' | 'renew' | 'transaction' | 'mode' | 'permits' | 'weight'
> {
  /**
   * When the lock is held elsewhere:
   * - `'wait'` (default): wait up to `timeoutMs`, then fail with `LockNotAcquiredError`
   *   (HTTP: 423 Locked).
   * - `'skip'`: do not run the method. A Promise method resolves to `undefined`, an Observable
   *   method completes without a value, an HTTP handler answers its usual success status with
   *   an empty body. Logged at debug level. One attempt, unless `timeoutMs` is given.
   */
  onBusy?: 'wait' | 'skip';
  /**
   * Keep the lock at least this long after it was taken, even when the method finishes sooner:
   * the lease is then set to end `minHoldMs` after acquisition and left to run out instead of
   * being released, so a scheduled job runs once per period across instances (ShedLock's
   * `lockAtLeastFor`). Applies whether the method succeeded or failed. Default 0.
   */
  minHoldMs?: number;
  /**
   * The owner scope of each call (`LockService.releaseScope`): a template rendered like a key
   * template (`'session:{user.sessionId}'`, `'tenant:{args.0}'`), or a function of the call's
   * context returning the scope.
   */
  scope?: string | ((context: LockKeyContext) => string);
}

/**
 * What the decorated method returns, as far as can be told when it is decorated: `promise`
 * (an `async` method, or one declared `: Promise<T>`), `observable` (declared
 * `: Observable<T>`), `value` (anything else: it cannot be awaited), or `unknown` (the
 * compiler emitted no type metadata).
 */
export type LockedMethodReturn = 'promise' | 'observable' | 'value' | 'unknown';

/** What `@LockedDocument` adds: which registered collection, and how to lock the document. */
export interface LockedDocumentTarget {
  /** The `forFeature()` name of the collection's `DocumentLocks`. */
  readonly name: string;
  /** Extra conditions the document must meet (static); not met = `DocumentNotFoundError`. */
  readonly where?: Record<string, unknown>;
  /** Fields to insert the document with when it is missing. */
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
  /**
   * The `lock.template` attribute of the method's metrics and spans: its key template(s) as
   * written (joined by `,`), or `Class.method` when the keys come from a function.
   */
  readonly metricsLabel: string;
  /** The key, id and scope templates as written (not key functions), for start-up checks. */
  readonly templates?: readonly string[];
  readonly options: LockedOptions;
  readonly returns: LockedMethodReturn;
  /**
   * Set by `@LockedDocument`: the method locks one document of a registered collection (the
   * key resolver renders its id) instead of keys of the lock collection. @internal
   */
  readonly document?: LockedDocumentTarget;
}

/** Reads `@Locked` metadata from a method (its own or copied from the function it wraps). */
export function getLockedMetadata(method: unknown): LockedMetadata | undefined {
  if (typeof method !== 'function') return undefined;
  return Reflect.getMetadata(LOCKED_METADATA, method) as LockedMetadata | undefined;
}
