import { MongoError, MongoNetworkError, MongoServerSelectionError } from 'mongodb';

const DUPLICATE_KEY = 11000;
/** "The $changeStream stage is only supported on replica sets". */
const CHANGE_STREAM_NEEDS_REPLICA_SET = 40573;

function codeOf(error: unknown): unknown {
  return typeof error === 'object' && error !== null
    ? (error as { code?: unknown }).code
    : undefined;
}

export function isDuplicateKeyError(error: unknown): boolean {
  return codeOf(error) === DUPLICATE_KEY;
}

/** The server cannot run change streams at all (a standalone `mongod`). */
export function isChangeStreamUnsupportedError(error: unknown): boolean {
  if (codeOf(error) === CHANGE_STREAM_NEEDS_REPLICA_SET) return true;
  const message = error instanceof Error ? error.message : '';
  return /only supported on replica sets/i.test(message);
}

/**
 * Worth retrying: network trouble, a primary stepping down, or anything the driver labels
 * retryable. Everything else (bad options, auth, a collection dropped) will not heal.
 */
export function isTransientMongoError(error: unknown): boolean {
  // No reachable primary for a while, as during an election.
  if (error instanceof MongoNetworkError || error instanceof MongoServerSelectionError) return true;
  if (!(error instanceof MongoError)) return false;
  return (
    error.hasErrorLabel('RetryableWriteError') ||
    error.hasErrorLabel('TransientTransactionError') ||
    error.hasErrorLabel('ResumableChangeStreamError') ||
    /not (writable )?primary|node is recovering|interrupted/i.test(error.message)
  );
}
