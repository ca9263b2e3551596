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

// Literals: some of these `HttpStatus` members do not exist in @nestjs/common 10.
export const HTTP_BAD_REQUEST = 400;
const HTTP_NOT_FOUND = 404;
const HTTP_CONFLICT = 409;
const HTTP_PRECONDITION_FAILED = 412;
export const HTTP_LOCKED = 423;
export const HTTP_PRECONDITION_REQUIRED = 428;
export const HTTP_SERVICE_UNAVAILABLE = 503;
/** Not in RFC 9110: nginx's status for a request whose client closed the connection first. */
export const HTTP_CLIENT_CLOSED_REQUEST = 499;

const REASONS: Record<number, string> = {
  [HTTP_BAD_REQUEST]: 'Bad Request',
  [HTTP_NOT_FOUND]: 'Not Found',
  [HTTP_CONFLICT]: 'Conflict',
  [HTTP_PRECONDITION_FAILED]: 'Precondition Failed',
  [HTTP_LOCKED]: 'Locked',
  [HTTP_PRECONDITION_REQUIRED]: 'Precondition Required',
  [HTTP_SERVICE_UNAVAILABLE]: 'Service Unavailable',
  [HTTP_CLIENT_CLOSED_REQUEST]: 'Client Closed Request',
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

/** What a document error becomes over HTTP, and the `Retry-After` it needs, if any. */
interface DocumentHttpError {
  exception: HttpException;
  retryAfterSeconds?: number;
}

/** The HTTP error for a document error, as listed on `DocumentHttpInterceptor`, or `undefined`. */
export function documentHttpError(
  error: unknown,
  ifMatchVersion: string | undefined,
): DocumentHttpError | undefined {
  if (error instanceof DocumentLockedError) {
    const seconds = retryAfterSecondsOf(error.retryAfterMs);
    const message = `The document is locked; try again in ${seconds} s`;
    return { exception: httpError(HTTP_LOCKED, message, error), retryAfterSeconds: seconds };
  }
  if (error instanceof DocumentNotFoundError) {
    return { exception: httpError(HTTP_NOT_FOUND, 'No such document', error) };
  }
  if (error instanceof VersionConflictError) {
    const expectedTag =
      typeof error.expected === 'string' ? error.expected : versionTag(error.expected);
    const fromIfMatch = ifMatchVersion !== undefined && expectedTag === ifMatchVersion;
    const current = versionTag(error.current);
    const message = `The document was changed meanwhile: its version is ${current ?? 'another'}, not ${expectedTag ?? 'the one given'}`;
    return {
      exception: httpError(fromIfMatch ? HTTP_PRECONDITION_FAILED : HTTP_CONFLICT, message, error),
    };
  }
  if (error instanceof InvalidLockKeyError || error instanceof InvalidLockOptionsError) {
    return { exception: httpError(HTTP_BAD_REQUEST, error.message, error) };
  }
  if (error instanceof LockStoreUnavailableError) {
    const exception = httpError(HTTP_SERVICE_UNAVAILABLE, MESSAGES.unavailable(1), error);
    return { exception, retryAfterSeconds: 1 };
  }
  return undefined;
}
