import { Observable, type Subscription } from 'rxjs';
import type { LockService } from '../lock.service';
import type { LockedMetadata } from './locked-metadata';
import { runLocked, SKIPPED } from './locked-run';

export interface LockedObservableHooks<T> {
  /** Maps errors that happen before `source` is called (acquisition); default: unchanged. */
  mapAcquireError?: (error: unknown) => unknown;
  /**
   * With `onBusy: 'skip'`, what the Observable emits when the lock was busy and `source` did
   * not run; without it, the Observable completes without a value.
   */
  skippedValue?: () => T;
}

/**
 * Holds the lock on `keys` for as long as the Observable made by `source` runs: acquired on
 * subscription, released on completion, error or unsubscription (or, with `minHoldMs`, left to
 * run out). Values pass through as they come; completion and errors are delivered after the
 * release, so a caller that sees the end also sees the lock free.
 *
 * `source` is called inside `withLock`, so whatever it starts runs in the lock's async context
 * (`LockService.current()`, re-entrant `@Locked` calls). Errors that happen before `source` is
 * called (acquisition) go through `mapAcquireError`; the source's own errors pass unchanged.
 */
export function lockedObservable<T>(
  lockService: LockService,
  keys: string[],
  metadata: LockedMetadata,
  source: () => Observable<T>,
  hooks: LockedObservableHooks<T> = {},
  scope?: string,
): Observable<T> {
  const { mapAcquireError = (error: unknown) => error, skippedValue } = hooks;
  return new Observable<T>((subscriber) => {
    const cancelWait = new AbortController();
    let started = false;
    let inner: Subscription | undefined;
    let finish: (() => void) | undefined;

    const run = () =>
      new Promise<void>((resolve, reject) => {
        started = true;
        if (subscriber.closed) return resolve();
        finish = resolve;
        inner = source().subscribe({
          next: (value) => subscriber.next(value),
          error: reject,
          complete: resolve,
        });
      });

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
      (error: unknown) => subscriber.error(started ? error : mapAcquireError(error)),
    );

    return () => {
      if (!started) cancelWait.abort();
      inner?.unsubscribe();
      finish?.();
    };
  });
}
