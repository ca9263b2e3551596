import { Observable, type Subscription } from 'rxjs';
import type { LockService } from '../lock.service';
import type { LockedOptions } from './locked-metadata';

/**
 * Holds the lock on `keys` for as long as the Observable made by `source` runs: acquired on
 * subscription, released on completion, error or unsubscription. Values pass through as they
 * come; completion and errors are delivered after the release, so a caller that sees the end
 * also sees the lock free.
 *
 * `source` is called inside `withLock`, so whatever it starts runs in the lock's async context
 * (`LockService.current()`, re-entrant `@Locked` calls). Errors that happen before `source` is
 * called (acquisition) go through `mapAcquireError`; the source's own errors pass unchanged.
 */
export function lockedObservable<T>(
  lockService: LockService,
  keys: string[],
  options: LockedOptions,
  source: () => Observable<T>,
  mapAcquireError: (error: unknown) => unknown = (error) => error,
): Observable<T> {
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

    lockService.withLock(keys, run, { ...options, signal: cancelWait.signal }).then(
      () => subscriber.complete(),
      (error: unknown) => subscriber.error(started ? error : mapAcquireError(error)),
    );

    return () => {
      if (!started) cancelWait.abort();
      inner?.unsubscribe();
      finish?.();
    };
  });
}
