import { formatMs } from './util/durations';
import { LockStoreUnavailableError } from './errors/lock-store-unavailable.error';
import { quoteLockKey } from './keys/lock-key';

// Messages of the library core, as functions so the wording lives in one place.

/** Most keys a message names: the rest are counted. */
const LISTED_KEYS = 10;

export function quotedKeyList(keys: readonly string[]): string {
  const listed = keys.slice(0, LISTED_KEYS).map(quoteLockKey).join(', ');
  const more = keys.length - LISTED_KEYS;
  return more > 0 ? `${listed} and ${more} more` : listed;
}

/** `subject`: a document's names itself (`Document {"$oid":"…"} of "orders"`). */
export function notAcquiredMessage(
  keys: readonly string[],
  timeoutMs: number,
  holderId: string | undefined,
  retryAfterMs: number | undefined,
  subject = `Lock ${quotedKeyList(keys)}`,
): string {
  const within = timeoutMs === 0 ? 'at once' : `within ${formatMs(timeoutMs)}`;
  const holder = holderId ? `; held by ${holderId}` : '';
  const lease = retryAfterMs !== undefined ? ` for ${formatMs(retryAfterMs)} more` : '';
  return `${subject} not acquired ${within}${holder}${lease}`;
}

/** `subject`: a document lock's names its document, as {@link notAcquiredMessage}'s does. */
export function lostMessage(
  key: string,
  reason: string,
  subject = `Lock ${quoteLockKey(key)}`,
): string {
  return `${subject} was lost: ${reason}`;
}

export const SERVICE_CLOSED_MESSAGE = 'LockService is closed';

/** Why holders still running at the end of the shutdown grace period lost their locks. */
export const SHUTDOWN_REVOKE_REASON = 'the LockService shut down before the work under it ended';

/**
 * `keys`: those the remaining handles hold. A handle from `acquire()` that nobody released
 * counts too: it is the likelier cause in a new application.
 */
export function shutdownGraceEndedMessage(
  running: number,
  shutdownGraceMs: number,
  keys: readonly string[] = [],
): string {
  const on = keys.length > 0 ? ` (${quotedKeyList(keys)})` : '';
  return (
    `${running} lock(s)${on} still held after shutdownGraceMs (${formatMs(shutdownGraceMs)}), ` +
    'by locked work still running or by a handle from acquire() never released: their signals ' +
    'abort and their locks are released now. Release every handle (try/finally, or await using)'
  );
}

export function releasesUnconfirmedMessage(call: string, operationTimeoutMs: number): string {
  return (
    `MongoDB did not confirm the releases of ${call} within ${operationTimeoutMs} ms: the ` +
    'holders were told; a release still on its way lands when MongoDB answers, or the lease runs out'
  );
}

/** An acquisition's start not done within the call's time. */
export function startTooSlowError(): LockStoreUnavailableError {
  return new LockStoreUnavailableError(
    'LockService had not started (connected to MongoDB) within the time of the call ' +
      '(timeoutMs, plus up to 1 s); the start goes on',
  );
}

/** A locked transaction's check that MongoDB has transactions, unanswered in the call's time. */
export function firstTooSlowError(keys: readonly string[]): LockStoreUnavailableError {
  return new LockStoreUnavailableError(
    `MongoDB did not answer whether it has transactions (for ${quotedKeyList(keys)}) ` +
      'within the time of the call (timeoutMs, plus up to 1 s)',
  );
}

export function clientCloseUnfinishedMessage(marginMs: number): string {
  return (
    `MongoDB did not answer within ${formatMs(marginMs)} of the shutdown grace period's end: ` +
    'close() returns, and the MongoDB client it created finishes closing once MongoDB answers ' +
    'or the connection drops'
  );
}

/** A 0.1 process holds a lock in the collection this version no longer reads. */
export function liveV1LockMessage(key: string, where: { collectionName: string }): string {
  return (
    `Lock ${JSON.stringify(key)} is held by a 0.1 process in collection ` +
    `${JSON.stringify(where.collectionName)}, which this version does not read: 0.1 processes and ` +
    'this one do not exclude each other. Stop every 0.1 process (see docs/upgrading.md)'
  );
}

export function duplicateHolderIdMessage(holderId: string): string {
  return (
    `holderId ${JSON.stringify(holderId)} is already used by another LockService of this ` +
    'process that has not been closed; give each instance its own'
  );
}

export function wouldDeadlockMessage(held: readonly string[], wanted: readonly string[]): string {
  return (
    `withLock(${quotedKeyList(wanted)}) inside a lock on ${quotedKeyList(held)}: nested locks must ask for ` +
    "all of a held lock's keys or none of them, or they would wait for themselves"
  );
}

/** `withLock`'s release failed after the work (`named`: how the lock is named). */
export function releaseFailedMessage(named: string, error: unknown): string {
  const later =
    error instanceof LockStoreUnavailableError
      ? '; it is retried in the background until its lease would end'
      : '';
  return `Could not release ${named}: ${String(error)}${later}`;
}
