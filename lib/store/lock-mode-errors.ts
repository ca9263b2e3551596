import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { MAX_HOLDERS_PER_KEY } from './lock-modes';
import type { LockModeRequest } from './lock-modes';

/** How a key is in use, as an attempt's reply tells it. */
export interface KeyInUse {
  exclusiveLive: boolean;
  /** The semaphore's permits (outliving its holders), or null for a lock. */
  permits: number | bigint | null;
}

/** The key is in use in another form than `mode` asks for: nothing was written. */
export function modeConflictError(
  key: string,
  mode: LockModeRequest,
  inUse: KeyInUse,
): InvalidLockOptionsError {
  const asked =
    mode.permits !== undefined
      ? `a semaphore of ${mode.permits} permits`
      : `${mode.mode === 'shared' ? 'a shared' : 'an exclusive'} lock`;
  // `permits` outlives the semaphore's holders: a live exclusive lease says more.
  const current = inUse.exclusiveLive
    ? 'an exclusive lock'
    : inUse.permits !== null
      ? `a semaphore of ${inUse.permits} permits`
      : 'a shared lock';
  return new InvalidLockOptionsError(
    `Lock ${JSON.stringify(key)} is in use as ${current}; it cannot be taken as ${asked} ` +
      '(every caller of one key must use it in the same form)',
    { option: mode.permits !== undefined ? 'permits' : 'mode' },
  );
}

/** Why a key at the holder cap was not acquired, appended to the not-acquired message. */
export function holderCapDetail(): string {
  return `: it has ${MAX_HOLDERS_PER_KEY} holders, the most one key can have`;
}

/**
 * The key has as many live holders as a key can have, and the caller would not wait
 * (`timeoutMs: 0`); a caller that waits does so until a holder leaves or its timeout passes.
 */
export function holderCapError(key: string, retryAfterMs?: number): LockNotAcquiredError {
  return new LockNotAcquiredError(`Lock ${JSON.stringify(key)} not acquired${holderCapDetail()}`, {
    keys: [key],
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  });
}
