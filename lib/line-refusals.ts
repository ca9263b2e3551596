import { DocumentNotFoundError } from './errors/document-not-found.error';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { quoteLockKey } from './keys/lock-key';
import { notAcquiredMessage } from './lock.messages';
import type { JoinResult } from './store/line/line-commands';
import type { LineKind } from './store/line/line-document';
import { LINE_CAPACITY } from './store/line/line-pipelines';
import { modeConflictError } from './store/lock-mode-errors';
import type { LockModeRequest } from './store/lock-modes';

interface RefusedRequest {
  key: string;
  kind: LineKind;
  timeoutMs: number;
}

/** The current engine's form of a line kind, for its error messages. */
function modeRequestOf(kind: LineKind): LockModeRequest {
  return kind.mode === 'permits'
    ? { mode: 'exclusive', permits: kind.permits, weight: kind.weight }
    : { mode: kind.mode, permits: undefined, weight: 1 };
}

/** A join error raised from a reply (no document, a 0.1 lock field, a bad option): no write. */
export function wroteNothing(error: unknown): boolean {
  return (
    error instanceof DocumentNotFoundError ||
    error instanceof LockNotAcquiredError ||
    error instanceof InvalidLockOptionsError
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
    return modeConflictError(request.key, modeRequestOf(request.kind), joined.inUse);
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
