import { noop } from 'rxjs';
import type { LockService } from '../lock.service';

/**
 * Releases begun by an Observable's unsubscription, per service and key. RxJS cannot wait for a
 * teardown, so a caller that got its value and left (`firstValueFrom`, `take(1)`, an HTTP client
 * of an `@Sse` route, a request timeout) and calls again at once would find its own lock still
 * held: with `timeoutMs: 0` or `onBusy: 'skip'`, busy.
 * `runLocked` lets such releases settle first (each within one command's bound).
 */
const underWay = new WeakMap<LockService, Map<string, Promise<unknown>>>();

/** `released` settles once the lock on `keys`, let go by an unsubscription, is released. */
export function releaseUnderWay(service: LockService, keys: string[], released: Promise<unknown>) {
  const byKey = underWay.get(service) ?? new Map<string, Promise<unknown>>();
  underWay.set(service, byKey);
  const settled = released.then(noop, noop);
  for (const key of keys) byKey.set(key, settled);
  void settled.then(() => {
    for (const key of keys) if (byKey.get(key) === settled) byKey.delete(key);
  });
}

/** Settles once the releases under way on any of `keys` have; undefined if there are none. */
export function releasesUnderWay(
  service: LockService,
  keys: string[],
): Promise<unknown> | undefined {
  const byKey = underWay.get(service);
  const pending = keys.flatMap((key) => byKey?.get(key) ?? []);
  return pending.length === 0 ? undefined : Promise.all(pending);
}
