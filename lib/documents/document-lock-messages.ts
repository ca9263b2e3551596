import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { notAcquiredMessage } from '../lock.messages';

/** How messages name the document of `key` (the id's Extended JSON, unquoted). */
export function documentSubject(collection: string, key: string): string {
  return `Document ${key} of ${JSON.stringify(collection)}`;
}

/** A lock's not-acquired error in a document's words (the key is the id's Extended JSON). */
export function documentNotAcquired(
  error: unknown,
  collection: string,
  key: string,
  timeoutMs: number,
): unknown {
  if (!(error instanceof LockNotAcquiredError)) return error;
  const { holderId, retryAfterMs } = error;
  const standard = notAcquiredMessage([key], timeoutMs, holderId, retryAfterMs);
  const subject = documentSubject(collection, key);
  // A refusal of another form (a full line, a lock field in the 0.1 form) came before any wait
  // ran out: its reason, not the wait's.
  const message = error.message.startsWith(standard)
    ? notAcquiredMessage([key], timeoutMs, holderId, retryAfterMs, subject) +
      error.message.slice(standard.length)
    : `${subject} not acquired: ${error.message.replace(/^Lock .* not acquired: /, '')}`;
  return new LockNotAcquiredError(message, { keys: error.keys, retryAfterMs, holderId });
}

/** MongoDB did not answer the read of a document our entry came to hold within the call's time. */
export function documentReadLate(key: string): string {
  return (
    `Document ${key}: MongoDB did not answer the read of the document within the time of the ` +
    'call (timeoutMs, plus up to 1 s); the lock is given back'
  );
}
