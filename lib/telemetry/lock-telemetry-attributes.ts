import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';

/** Meter and tracer name. */
export const TELEMETRY_SCOPE = 'nestjs-mongo-lock';

/** The label of acquisitions that name none (`LockService` called directly). */
export const DIRECT_LABEL = '(direct)';

/** Attribute names, the same on metrics and spans. */
export const ATTR_TEMPLATE = 'lock.template';
export const ATTR_OUTCOME = 'lock.outcome';
export const ATTR_KEY_COUNT = 'lock.key_count';
export const ATTR_METHOD = 'lock.method';
export const ATTR_ERROR_TYPE = 'error.type';
export const ATTR_LEADERSHIP = 'lock.leadership';

/**
 * How an acquisition ended: `timeout` is `LockNotAcquiredError` (busy, whatever the wait),
 * `unavailable` is `LockStoreUnavailableError`, `error` anything else (aborted, closed).
 */
export type AcquireOutcome = 'acquired' | 'timeout' | 'unavailable' | 'error';

export function acquireOutcomeOf(error: unknown): Exclude<AcquireOutcome, 'acquired'> {
  if (error instanceof LockNotAcquiredError) return 'timeout';
  if (error instanceof LockStoreUnavailableError) return 'unavailable';
  return 'error';
}

/** The error's class name: never its message, which may quote a key. */
export function errorTypeOf(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}
