import { Observable } from 'rxjs';
import { linkAbortSignals } from './linked-abort-signal';

/**
 * A wait as a cold Observable: `wait` runs on subscription with a signal that aborts on
 * unsubscription or on `closing`; emits once and completes when it resolves; its error is
 * passed on, unless the subscriber left first.
 *
 * @example
 * const freed$ = waitObservable((signal) => waitUntilFree('orders:42', signal), closing);
 */
export function waitObservable(
  wait: (signal: AbortSignal) => Promise<void>,
  closing: AbortSignal,
): Observable<void> {
  return new Observable<void>((subscriber) => {
    const cancel = new AbortController();
    const linked = linkAbortSignals([cancel.signal, closing]);
    Promise.resolve()
      .then(() => wait(linked.signal))
      .finally(() => linked.unlink())
      .then(
        () => {
          subscriber.next();
          subscriber.complete();
        },
        (error: unknown) => {
          if (!cancel.signal.aborted) subscriber.error(error);
        },
      );
    return () => cancel.abort();
  });
}
