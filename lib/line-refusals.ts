import { DocumentNotFoundError } from './errors/document-not-found.error';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { quoteLockKey } from './keys/lock-key';
import { notAcquiredMessage } from './lock.messages';
import type { LineKind } from './store/line/line-document';
import { LINE_CAPACITY } from './store/line/line-pipelines';
import type { JoinResult, KeyInUse } from './store/line/line-commands';
import { isDefiniteFailure } from './store/mongo-error-codes';

/** What a refusal names of its request (`LineAcquireRequest`). */
interface RefusedRequest {
  key: string;
  kind: LineKind;
  timeoutMs: number;
}

/**
 * A join error that says the join wrote nothing: raised from a reply (no document, a 0.1 lock
 * field, a bad option), or MongoDB refused its write. The join's earlier writes, if any, made no
 * entry of ours (a miss, a duplicate key), nor did a read after a write that found none.
 */
export function wroteNothing(error: unknown): boolean {
  return (
    error instanceof DocumentNotFoundError ||
    error instanceof LockNotAcquiredError ||
    error instanceof InvalidLockOptionsError ||
    isDefiniteFailure(error)
  );
}

export function notAcquired(
  request: Pick<RefusedRequest, 'key' | 'timeoutMs'>,
  holderId?: string,
  retryAfterMs?: number,
): LockNotAcquiredError {
  return new LockNotAcquiredError(
    notAcquiredMessage([request.key], request.timeoutMs, holderId, retryAfterMs),
    { keys: [request.key], holderId, retryAfterMs },
  );
}

/** Why a join that made no entry fails its call: the key's form, a full line, or held. */
export function joinRefused(
  request: RefusedRequest,
  joined: Extract<JoinResult, { joined: false }>,
): Error {
  if (joined.reason === 'kind') {
    return modeConflictError(request.key, request.kind, joined.inUse);
  }
  if (joined.reason === 'full') {
    // Not a wait that ran out: the line has no room for one more entry now.
    return new LockNotAcquiredError(
      `Lock ${quoteLockKey(request.key)} not acquired: ${LINE_CAPACITY} calls already ` +
        'hold or wait for it',
      { keys: [request.key], holderId: joined.holderId, retryAfterMs: joined.retryAfterMs },
    );
  }
  return notAcquired(request, joined.holderId, joined.retryAfterMs);
}

/** The key is in use in another form than `kind` asks for: nothing was written. */
function modeConflictError(key: string, kind: LineKind, inUse: KeyInUse): InvalidLockOptionsError {
  const asked =
    kind.mode === 'permits'
      ? `a semaphore of ${kind.permits} permits`
      : `${kind.mode === 'shared' ? 'a shared' : 'an exclusive'} lock`;
  // `permits` outlives the semaphore's holders: a live exclusive lease says more.
  const current = inUse.exclusiveLive
    ? 'an exclusive lock'
    : inUse.permits !== null
      ? `a semaphore of ${inUse.permits} permits`
      : 'a shared lock';
  return new InvalidLockOptionsError(
    `Lock ${quoteLockKey(key)} is in use as ${current}; it cannot be taken as ${asked} ` +
      '(every caller of one key must use it in the same form)',
    { option: kind.mode === 'permits' ? 'permits' : 'mode' },
  );
}
