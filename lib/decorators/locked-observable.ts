import { Observable, defer, tap, type Subscription } from 'rxjs';
import { MongoLockError } from '../errors';
import type { LockService } from '../lock.service';
import { MESSAGES } from '../mongo-lock.messages';
import type { LockedMetadata } from './locked-metadata';
import { runLocked, SKIPPED } from './locked-run';

export interface LockedObservableHooks<T> {
  /**
   * Maps errors of the lock itself: taking it, and finishing it after `source` (a locked
   * transaction's commit, a lease found lost); never `source`'s own. Default: unchanged.
   */
  mapLockError?: (error: unknown) => unknown;
  /**
   * With `onBusy: 'skip'`, what the Observable emits when the lock was busy and `source` did
   * not run; without it, the Observable completes without a value.
   */
  skippedValue?: () => T;
  /**
   * An unsubscription before `source` completed aborts a locked transaction instead of
   * committing what was done: for a client that left an HTTP stream. Off by default, since a
   * caller's `firstValueFrom` or `take(1)` also unsubscribes once it has what it wanted.
   */
  abortTransactionOnUnsubscribe?: boolean;
  /**
   * When the lock is lost while `source` runs (the shutdown grace period ended, the lease could
   * not be renewed, `releaseScope`), stop waiting for it: unsubscribe and fail at once with the
   * `LockLostError`, through `mapLockError`. For a request handler, so that its client is
   * answered and the server can close. Off by default: a caller's own Observable runs to its end.
   */
  endOnLockLoss?: boolean;
  /**
   * Work that `source` started and that neither its end nor an unsubscription stops (a
   * handler's Promise): the lock is kept, and the end delivered, once it settles.
   */
  workInFlight?: () => PromiseLike<unknown> | undefined;
  /** Told when the subscriber leaves, before the lock ends. */
  unsubscribed?: () => void;
}

/**
 * Holds the lock on `keys` for as long as the Observable made by `source` runs: acquired on
 * subscription, released on completion, error or unsubscription (or, with `minHoldMs`, left to
 * run out). Values pass through as they come; completion and errors are delivered after the
 * release, so a caller that sees the end also sees the lock free.
 *
 * `source` is called inside `withLock`, so whatever it starts runs in the lock's async context
 * (`LockService.current()`, re-entrant `@Locked` calls). The lock's own errors go through
 * `mapLockError`; the source's errors pass unchanged, even when they are lock errors (a
 * handler's own `acquire` that failed is the handler's failure).
 */
export function lockedObservable<T>(
  lockService: LockService,
  keys: string[],
  metadata: LockedMetadata,
  source: () => Observable<T>,
  hooks: LockedObservableHooks<T> = {},
  scope?: string,
): Observable<T> {
  const { mapLockError = (error: unknown) => error, skippedValue } = hooks;
  const abortOnUnsubscribe = hooks.abortTransactionOnUnsubscribe === true;
  return new Observable<T>((subscriber) => {
    const cancelWait = new AbortController();
    let started = false;
    let inner: Subscription | undefined;
    /** Ends the locked work early, on unsubscription (see the teardown below). */
    let stop: (() => void) | undefined;
    // What `source` failed with, if it did: `withLock` rethrows that very value.
    let sourceFailure: { error: unknown } | undefined;

    const run = (lockSignal: AbortSignal) =>
      new Promise<void>((resolve, reject) => {
        started = true;
        if (subscriber.closed) return resolve();
        if (hooks.endOnLockLoss && endOnLoss(lockSignal, reject)) return;
        // A transaction whose client left is aborted, never committed half done; any other
        // work just ends, and the lock is released.
        stop =
          abortOnUnsubscribe && metadata.options.transaction
            ? () => reject(new MongoLockError(MESSAGES.transactionUnsubscribed(metadata.where)))
            : resolve;
        // `defer`: a source that throws instead of returning fails like one that errors.
        inner = defer(source)
          .pipe(tap({ error: (error: unknown) => (sourceFailure = { error }) }))
          .subscribe({
            next: (value) => subscriber.next(value),
            // The source's own error, whatever it is: `withLock` rethrows that very value.
            // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
            error: (error: unknown) => afterWork(() => reject(error)),
            complete: () => afterWork(resolve),
          });
      });

    /** Runs `end` once the work in flight, if any, settles: the lock is held until then. */
    const afterWork = (end: () => void) => {
      const running = hooks.workInFlight?.();
      if (running) void running.then(end);
      else end();
    };

    /**
     * Ends the work when the lock is lost: rejects with the `LockLostError` of the signal.
     * True if it was lost already (then the work must not start).
     */
    const endOnLoss = (lockSignal: AbortSignal, reject: (reason: unknown) => void): boolean => {
      const onLoss = () => {
        inner?.unsubscribe();
        reject(lockSignal.reason);
      };
      if (lockSignal.aborted) {
        onLoss();
        return true;
      }
      lockSignal.addEventListener('abort', onLoss, { once: true });
      subscriber.add(() => lockSignal.removeEventListener('abort', onLoss));
      return false;
    };

    runLocked(lockService, keys, metadata, run, cancelWait.signal, scope).then(
      (outcome) => {
        if (outcome === SKIPPED && skippedValue) {
          let value: T;
          try {
            value = skippedValue();
          } catch (error) {
            subscriber.error(error);
            return;
          }
          subscriber.next(value);
        }
        subscriber.complete();
      },
      (error: unknown) => {
        // Nobody listens any more (an unsubscription ended the work): nothing to map or send.
        if (subscriber.closed) return;
        const ownError = sourceFailure !== undefined && sourceFailure.error === error;
        subscriber.error(ownError ? error : mapSafely(mapLockError, error));
      },
    );

    return () => {
      if (!started) cancelWait.abort();
      inner?.unsubscribe();
      hooks.unsubscribed?.();
      afterWork(() => stop?.());
    };
  });
}

/** `map(error)`, or `error` itself if the mapping throws: an error is never lost to a mapper. */
function mapSafely(map: (error: unknown) => unknown, error: unknown): unknown {
  try {
    return map(error);
  } catch {
    return error;
  }
}
