import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
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
