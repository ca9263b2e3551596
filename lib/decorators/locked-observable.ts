import { Observable, defer, tap, type Subscription } from 'rxjs';
import { MongoLockError } from '../errors';
import type { LockService } from '../lock.service';
import { MESSAGES } from '../mongo-lock.messages';
import type { LockedMetadata } from './locked-metadata';
import { runLocked, SKIPPED } from './locked-run';
import { releaseUnderWay } from './releases-under-way';

export interface LockedObservableHooks<T> {
  /** Maps the lock's own errors (taking it; finishing it: commit, lost lease), never `source`'s. */
  mapLockError?: (error: unknown) => unknown;
  /** With `onBusy: 'skip'`, what to emit when busy; without it the Observable completes empty. */
  skipped?: () => Observable<T>;
  /**
   * Abort, not commit, a locked transaction on unsubscription before `source` completed (a client
   * left). Off by default: `firstValueFrom` or `take(1)` also unsubscribe once satisfied.
   */
  abortTransactionOnUnsubscribe?: boolean;
  /** Work no unsubscription stops (a handler's Promise): the lock and the end wait for it. */
  workInFlight?: () => PromiseLike<unknown> | undefined;
  /** Told when the subscriber leaves, before the lock ends. */
  unsubscribed?: () => void;
  /**
   * Ends the wait for the lock when it aborts (an HTTP client left): `source` is never called,
   * and the Observable fails with its reason (through `mapLockError`). Once `source` runs, it
   * is not listened to.
   */
  waitSignal?: AbortSignal;
}

/**
 * Holds the lock on `keys` while the Observable from `source` runs: acquired on subscription,
 * released on completion, error or unsubscription (or left to run out with `minHoldMs`). On lock
 * loss (grace period over, renewal failed, `releaseScope`) `source` is unsubscribed and the
 * Observable fails at once with the `LockLostError`, so a request is answered.
 * Completion and errors come after the release, so a caller that sees the end sees the lock free;
 * one that unsubscribes does not wait for it, but its next locked call here does.
 * `source` is called inside `withLock`, in the lock's async context. Lock errors go through
 * `mapLockError`; the source's pass unchanged, even lock errors (its own failed `acquire`).
 */
export function lockedObservable<T>(
  lockService: LockService,
  keys: string[],
  metadata: LockedMetadata,
  source: () => Observable<T>,
  hooks: LockedObservableHooks<T> = {},
  scope?: string,
): Observable<T> {
  const { mapLockError = (error: unknown) => error, skipped } = hooks;
  return new Observable<T>((subscriber) => {
    const cancelWait = new AbortController();
    let started = false;
    let inner: Subscription | undefined;
    // Ends the work early, on unsubscription.
    let stop: (() => void) | undefined;
    // What `source` failed with, if it did: `withLock` rethrows that very value.
    let sourceFailure: { error: unknown } | undefined;

    const run = (lockSignal: AbortSignal) =>
      new Promise<void>((resolve, reject) => {
        started = true;
        if (subscriber.closed) return resolve();
        // Given up while the grant was on its way: the lock is released unused.
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        if (cancelWait.signal.aborted) return reject(cancelWait.signal.reason);
        const onLoss = () => {
          inner?.unsubscribe();
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
          reject(lockSignal.reason);
        };
        whenAborted(lockSignal, onLoss, subscriber);
        // Lost already: do not start.
        if (lockSignal.aborted) return;
        // A transaction whose client left is aborted, never committed half done.
        stop =
          hooks.abortTransactionOnUnsubscribe && metadata.options.transaction
            ? () => reject(new MongoLockError(MESSAGES.transactionUnsubscribed(metadata.where)))
            : resolve;
        // `defer`: a source that throws instead of returning fails like one that errors.
        inner = defer(source)
          .pipe(tap({ error: (error: unknown) => (sourceFailure = { error }) }))
          .subscribe({
            // Each value looks at the signal first: after a pause past the lease, a timer due
            // before the keeper's would otherwise deliver one outside the lock.
            next: (value) => {
              if (!lockSignal.aborted) subscriber.next(value);
            },
            // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
            error: (error: unknown) => afterWork(() => reject(error)),
            complete: () => afterWork(resolve),
          });
        // The caller left on a value sent during `subscribe`, before `inner` was set.
        if (subscriber.closed) inner.unsubscribe();
      });

    /** Runs `end` once the work in flight, if any, settles: the lock is held until then. */
    const afterWork = (end: () => void) => {
      const running = hooks.workInFlight?.();
      if (running) void running.then(end);
      else end();
    };

    const { waitSignal } = hooks;
    if (waitSignal) {
      whenAborted(waitSignal, () => !started && cancelWait.abort(waitSignal.reason), subscriber);
    }

    const locked = runLocked(lockService, keys, metadata, run, cancelWait.signal, scope);
    locked.then(
      (outcome) => {
        if (outcome === SKIPPED && skipped) defer(skipped).subscribe(subscriber);
        else subscriber.complete();
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
      // The release begins once the work in flight (if any) settles: a call after that waits
      // for it, rather than find this lock still held.
      else afterWork(() => releaseUnderWay(lockService, keys, locked));
      inner?.unsubscribe();
      hooks.unsubscribed?.();
      afterWork(() => stop?.());
    };
  });
}

/** Runs `listener` once `signal` aborts (now, if it has), until `subscription` ends. */
function whenAborted(signal: AbortSignal, listener: () => void, subscription: Subscription) {
  if (signal.aborted) return listener();
  signal.addEventListener('abort', listener, { once: true });
  subscription.add(() => signal.removeEventListener('abort', listener));
}

/** `map(error)`, or `error` itself if the mapping throws: an error is never lost to a mapper. */
function mapSafely(map: (error: unknown) => unknown, error: unknown): unknown {
  try {
    return map(error);
  } catch {
    return error;
  }
}
