import { Observable } from 'rxjs';
import { linkAbortSignals } from './linked-abort-signal';

/**
 * A wait as a cold Observable: `wait` runs on subscription, with a signal that aborts on
 * unsubscription (with `reason()`) or on any of `signals`; emits its value once and completes,
 * or errors unless the subscriber left first. A value after the subscriber left goes to `late`
 * (a lock won in that instant, which nobody else would release).
 *
 * @example
 * const freed$ = waitObservable((signal) => waitUntilFree('orders:42', signal), [closing]);
 */
export function waitObservable<T>(
  wait: (signal: AbortSignal) => Promise<T>,
  signals: readonly (AbortSignal | undefined)[],
  { reason, late }: { reason?: () => unknown; late?: (value: T) => void } = {},
): Observable<T> {
  return new Observable<T>((subscriber) => {
    const cancel = new AbortController();
    const linked = linkAbortSignals([...signals, cancel.signal]);
    Promise.resolve()
      .then(() => wait(linked.signal))
      .finally(() => linked.unlink())
      .then(
        (value) => {
          if (subscriber.closed) return late?.(value);
          subscriber.next(value);
          subscriber.complete();
        },
        (error: unknown) => {
          if (!cancel.signal.aborted) subscriber.error(error);
        },
      );
    return () => cancel.abort(reason?.());
  });
}
