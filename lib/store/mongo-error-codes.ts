import {
  MongoError,
  MongoErrorLabel,
  MongoNetworkError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  MongoWriteConcernError,
} from 'mongodb';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import { MongoLockError } from '../errors/mongo-lock.error';

/** "This node cannot serve the command now" codes, from the driver's retryability rules. */
const UNAVAILABLE_CODES = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  64, // WriteConcernFailed (wtimeout): applied on the primary, majority unconfirmed
  89, // NetworkTimeout
  91, // ShutdownInProgress
  189, // PrimarySteppedDown
  262, // ExceededTimeLimit
  9001, // SocketException
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
  10058, // LegacyNotPrimary
]);

const UNAVAILABLE_LABELS: string[] = [
  MongoErrorLabel.RetryableWriteError,
  MongoErrorLabel.ResumableChangeStreamError,
  MongoErrorLabel.TransientTransactionError,
  // An overloaded server (8.x) after driver 7's own backoff: by name, as driver 6 lacks them.
  'RetryableError',
  'SystemOverloadedError',
];

function codeOf(error: unknown): unknown {
  return typeof error === 'object' && error !== null
    ? (error as { code?: unknown }).code
    : undefined;
}

export function isDuplicateKeyError(error: unknown): boolean {
  return codeOf(error) === 11000; // DuplicateKey
}

const RESUME_POINT_LOST_CODES = new Set([
  136, // CappedPositionLost
  260, // InvalidResumeToken
  280, // ChangeStreamFatalError
  286, // ChangeStreamHistoryLost
]);

/** The change stream cannot continue where it stood: reopening must start afresh. */
export function isResumePointLostError(error: unknown): boolean {
  return RESUME_POINT_LOST_CODES.has(Number(codeOf(error)));
}

/**
 * MongoDB could not serve the command now but may later (network, no primary, a step-down, a
 * write concern timeout). Decided by class, label and code as the driver does; the message only
 * for servers that send neither. Other errors (options, auth) do not heal by retrying.
 */
export function isStoreUnavailableError(error: unknown): boolean {
  if (error instanceof LockStoreUnavailableError) return true;
  if (error instanceof MongoNetworkError || error instanceof MongoServerSelectionError) return true;
  if (error instanceof Error && SOCKET_ERROR_CODES.has(String(codeOf(error)))) return true;
  // The command may have been applied, but its durability is unknown: retry by token.
  if (error instanceof MongoWriteConcernError) return true;
  if (!(error instanceof MongoError)) return false;
  // The client's own `timeoutMS` ran out (driver 6.11+): like our bound, the outcome is unknown.
  if (error.name === 'MongoOperationTimeoutError') return true;
  if (UNAVAILABLE_LABELS.some((label) => error.hasErrorLabel(label))) return true;
  if (UNAVAILABLE_CODES.has(Number(codeOf(error)))) return true;
  return /not (writable )?primary|node is recovering/i.test(error.message);
}

/**
 * Codes by which MongoDB refuses a write before it takes effect. Listed, not inferred: the
 * driver retries a write whose reply was lost and throws the retry's error, so another code
 * (IncompleteTransactionHistory, a time limit, an interruption) may follow a write that landed.
 */
const NOTHING_WRITTEN_CODES = new Set([
  2, // BadValue
  9, // FailedToParse
  13, // Unauthorized
  14, // TypeMismatch
  121, // DocumentValidationFailure
  10334, // BSONObjectTooLarge
  11000, // DuplicateKey
  17419, // the updated document would exceed the size limit
]);

/**
 * MongoDB answered that the command failed, so it did not take effect: a write error (a
 * validation failure, a duplicate key, a document too large) or a refusal (no authorization).
 * Checked on a driver error or on the library's error that wraps it (`cause`). Everything else,
 * a lost or late reply or a write concern error included, leaves the outcome unknown: a leave by
 * token costs one write, a stale entry keeps the key for its lease.
 */
export function isDefiniteFailure(error: unknown): boolean {
  // MongoDB did not answer: whatever its cause names (the server monitor's last failure for a
  // command cut by its bound), the command's outcome is unknown.
  if (error instanceof LockStoreUnavailableError) return false;
  const driverError = error instanceof MongoLockError ? error.cause : error;
  // A write concern error carries a code too, but comes after the write.
  return (
    driverError instanceof MongoServerError &&
    !(driverError instanceof MongoWriteConcernError) &&
    NOTHING_WRITTEN_CODES.has(Number(codeOf(driverError)))
  );
}

/**
 * A failure a retry by token may get past: MongoDB unavailable, or a refusal that does not say
 * nothing was written (Interrupted, InternalError, TemporarilyUnavailable). Not errors of ours.
 */
export function isPassingFailure(error: unknown): boolean {
  if (isStoreUnavailableError(error)) return true;
  const driverError = error instanceof MongoLockError ? error.cause : error;
  return driverError instanceof MongoServerError && !isDefiniteFailure(driverError);
}

/** Refusals that may pass, by name: InternalError, Interrupted, TemporarilyUnavailable. */
const PASSING_REFUSAL_CODES = new Set([1, 11601, 365]);

/**
 * MongoDB unavailable, or a refusal named in {@link PASSING_REFUSAL_CODES}: for the start and for
 * reads, where any other refusal (a login refused, an index in conflict, an operator the server
 * lacks) would only fail again. Commands by token retry more ({@link isPassingFailure}): there a
 * refusal may follow a write, and a retry costs one write within a lease.
 */
export function isNamedPassingRefusal(error: unknown): boolean {
  if (isStoreUnavailableError(error)) return true;
  const driverError = error instanceof MongoLockError ? error.cause : error;
  return (
    driverError instanceof MongoServerError &&
    PASSING_REFUSAL_CODES.has(Number(codeOf(driverError)))
  );
}

/** A document over MongoDB's BSON size limit: 17419 on 7.0, 10334 BSONObjectTooLarge later. */
const TOO_LARGE_CODES = new Set([10334, 17419]);

/** MongoDB refused a write whose document, or the command itself, would be too large. */
export function isTooLargeError(error: unknown): boolean {
  return isDefiniteFailure(error) && TOO_LARGE_CODES.has(Number(codeOf(error)));
}

/**
 * Node socket and DNS errors the driver may pass on unwrapped (`write ECONNRESET` on a big
 * command, `querySrv ESERVFAIL`).
 */
const SOCKET_ERROR_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTCONN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  // DNS, as a mongodb+srv URI's lookup throws them: a resolver away, or a name not found yet.
  'ESERVFAIL',
  'ETIMEOUT',
  'EREFUSED',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

/**
 * The library's error for a driver error (kept as `cause`): `LockStoreUnavailableError` when a
 * retry later may work, else `MongoLockError`.
 */
export function toStoreError(error: unknown, command: string): MongoLockError {
  if (error instanceof MongoLockError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  if (isStoreUnavailableError(error) || error instanceof MongoTopologyClosedError) {
    return new LockStoreUnavailableError(`MongoDB is unavailable (${command}): ${reason}`, {
      cause: error,
    });
  }
  return new MongoLockError(`Lock command ${command} failed: ${reason}`, { cause: error });
}
