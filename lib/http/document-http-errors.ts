import { HttpException } from '@nestjs/common';
import {
  DocumentLockedError,
  DocumentNotFoundError,
  InvalidLockKeyError,
  InvalidLockOptionsError,
  LockStoreUnavailableError,
  VersionConflictError,
} from '../errors';
import { MESSAGES } from '../mongo-lock.messages';
import { versionTag } from '../store/documents/document-version';

// Statuses as literals: some `HttpStatus` members do not exist in @nestjs/common 10.
const REASONS: Record<number, string> = {
  400: 'Bad Request',
  404: 'Not Found',
  409: 'Conflict',
  412: 'Precondition Failed',
  423: 'Locked',
  428: 'Precondition Required',
  503: 'Service Unavailable',
  // Not in RFC 9110: nginx's status for a request whose client closed the connection first.
  499: 'Client Closed Request',
};

/** An `HttpException` with Nest's `{ statusCode, message, error }` body, on every Nest version. */
export function httpError(status: number, message: string, cause?: unknown): HttpException {
  const body = { statusCode: status, message, error: REASONS[status] ?? 'Error' };
  return new HttpException(body, status, cause === undefined ? undefined : { cause });
}

/** Whole seconds until a holder's lease ends, at least 1. */
export function retryAfterSecondsOf(retryAfterMs: number | undefined): number {
  return Math.max(1, Math.ceil((retryAfterMs ?? 0) / 1000));
}

/**
 * The HTTP error for a document error (docs/document-locks.md, "Over HTTP"), and the
 * `Retry-After` it needs; `undefined` for other errors.
 */
export function documentHttpError(
  error: unknown,
  ifMatchVersion: string | undefined,
): { exception: HttpException; retryAfterSeconds?: number } | undefined {
  if (error instanceof DocumentLockedError) {
    const seconds = retryAfterSecondsOf(error.retryAfterMs);
    const message = `The document is locked; try again in ${seconds} s`;
    return { exception: httpError(423, message, error), retryAfterSeconds: seconds };
  }
  if (error instanceof DocumentNotFoundError) {
    return { exception: httpError(404, 'No such document', error) };
  }
  if (error instanceof VersionConflictError) {
    const expectedTag =
      typeof error.expected === 'string' ? error.expected : versionTag(error.expected);
    const fromIfMatch = ifMatchVersion !== undefined && expectedTag === ifMatchVersion;
    const current = versionTag(error.current);
    const message = `The document was changed meanwhile: its version is ${current ?? 'another'}, not ${expectedTag ?? 'the one given'}`;
    return { exception: httpError(fromIfMatch ? 412 : 409, message, error) };
  }
  if (error instanceof InvalidLockKeyError || error instanceof InvalidLockOptionsError) {
    return { exception: httpError(400, error.message, error) };
  }
  if (error instanceof LockStoreUnavailableError) {
    return { exception: httpError(503, MESSAGES.unavailable(1), error), retryAfterSeconds: 1 };
  }
  return undefined;
}
