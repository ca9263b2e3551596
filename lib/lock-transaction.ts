import { MongoError } from 'mongodb';
import type { ClientSession, MongoClient, TransactionOptions } from 'mongodb';
import { LockLostError } from './errors/lock-lost.error';
import { LockStoreUnavailableError } from './errors/lock-store-unavailable.error';
import { MongoLockError } from './errors/mongo-lock.error';
import { TransactionOutcomeUnknownError } from './errors/transaction-outcome-unknown.error';
import type { HeldKey } from './lease-keeper';
import type { MongoLockHandle } from './lock-handle';
import { lostMessage } from './lock.messages';
import type { LockConnection } from './store/lock-store';
import { StepDeadline } from './util/timers';

const givenUp = () => new MongoLockError('The locked transaction was given up on');

/** Where a locked transaction runs (the client) and checks its locks (the lock collection). */
export interface TransactionLocks {
  readonly client: MongoClient;
  /** The transaction's options, whatever the client's defaults: read primary, commit majority. */
  readonly options: TransactionOptions;
  /** `operationTimeoutMs`: how long the check, and the commit after it, may go unanswered. */
  readonly answerWithinMs: number;
  /** Inside `session`'s transaction: the entry `held` came from still holds, proven by a write. */
  confirmHeldIn(held: HeldKey, session: ClientSession): Promise<boolean>;
  /** Aborts `session`'s transaction if a failure left it open on the server; else a no-op. */
  endTransactionOf(session: ClientSession): Promise<void>;
}

/** Fails before any work runs where a transaction cannot: never a silent run without one. */
export async function requireTransactions(store: LockConnection): Promise<void> {
  const refusal = await store.transactionsRefusal();
  if (refusal !== undefined) {
    throw new MongoLockError(
      `transaction: true needs MongoDB transactions (a replica set or a sharded cluster); ${refusal}`,
    );
  }
}

/**
 * The transaction `session` runs, as the object the driver replaces at each `startTransaction`
 * (one per transaction number). No public API tells transactions apart: the public
 * `serverSession.txnNumber` moves only at the next command, so the work's first write moves it
 * as a new transaction would. The `transaction` field is internal, but replaced at each start
 * since driver 3.x; were it gone, this is `undefined` before and after: no false refusal, and
 * `inTransaction()` is still checked.
 */
function transactionOf(session: ClientSession): unknown {
  return (session as unknown as { transaction?: object }).transaction;
}

function endedByWorkMessage(keys: readonly string[]): string {
  return (
    `The work under ${keys.map((key) => JSON.stringify(key)).join(', ')} ended its transaction ` +
    'itself (commitTransaction or abortTransaction): a commit of its own lands its writes ' +
    'before the check that the lock is still held. Let withLock commit; throw to abort'
  );
}

/**
 * Runs `fn` in a transaction on the handle's session. Before the commit, a write to each lock in
 * the transaction proves it still ours: a takeover makes the commit fail, a lost lock aborts it.
 * `withTransaction` reruns `fn` after a transient error and retries a commit of unknown outcome;
 * one still unconfirmed is a {@link TransactionOutcomeUnknownError}. `fn` must not end the
 * transaction itself (nor end it and start another): that is a `MongoLockError`.
 */
export async function runInTransaction<T>(
  store: TransactionLocks,
  handle: MongoLockHandle,
  fn: () => T | Promise<T>,
  options: { maxCommitTimeMS?: number },
  /** Told once the transaction committed. */
  onCommitted: () => void = () => undefined,
): Promise<T> {
  // A renewal would write the lock the transaction checks (a write conflict, `fn` rerun again
  // and again): renewed in full now and not until the end, so the work must fit in one lease.
  await handle.extend();
  const resumeRenewal = handle.pauseRenewal();
  const session = store.client.startSession();
  handle.session = session;
  const named = handle.keys.map((key) => JSON.stringify(key)).join(', ');
  // The library's own steps after the work (the check, the commit) are bounded like any lock
  // command: a MongoDB that does not answer them fails the call, rather than hold it forever.
  const ending = new StepDeadline();
  /** The work's own error, which passes through whatever its labels say. */
  let workError: unknown;
  try {
    let result!: T;
    let endedByWork: MongoLockError | undefined;
    const transactionOptions = { ...store.options, ...options };
    const transaction = session.withTransaction(async () => {
      // Given up on (the call rejected, its lock released): not run again after a transient error.
      if (ending.expired) throw givenUp();
      // The work's own time is not bounded (a rerun's neither).
      ending.disarm();
      // A rerun (after a transient error) of work whose lock is gone would run unprotected: the
      // loss is the call's error (not transient: the driver aborts and gives it back).
      handle.signal.throwIfAborted();
      const started = transactionOf(session);
      const endedItself = () => transactionOf(session) !== started || !session.inTransaction();
      let failed: { error: unknown } | undefined;
      try {
        result = await fn();
      } catch (error) {
        failed = { error };
      }
      if (failed && !endedItself()) {
        // The driver aborts it next, within the bound of the library's steps: the work's error
        // then, its transaction ended by killSessions.
        workError = failed.error;
        ending.arm(store.answerWithinMs, () => workError);
        throw workError;
      }
      // Its own commit landed the writes before the check below, even if it started another
      // transaction after it: that one is aborted, not committed unchecked. Refused after the
      // driver returns: thrown here, the driver would try to abort the ended transaction and
      // throw its own error instead. (Failed after ending its transaction itself: not rerun, as
      // its own commit would go unseen.)
      if (failed || endedItself()) {
        const refusal = new MongoLockError(
          endedByWorkMessage(handle.keys),
          failed && { cause: failed.error },
        );
        ending.arm(store.answerWithinMs, () => refusal);
        if (session.inTransaction()) await session.abortTransaction();
        endedByWork = refusal;
        return;
      }
      ending.arm(
        store.answerWithinMs,
        () =>
          new LockStoreUnavailableError(
            `MongoDB did not answer the check of ${named} before the commit within ` +
              `${store.answerWithinMs} ms; nothing was committed`,
          ),
      );
      for (const held of handle.heldKeys) {
        if (!(await store.confirmHeldIn(held, session))) {
          // Its own deadline says why, if it passed: a lease the work outlasted.
          if (handle.lost && handle.lostReason) throw handle.lostReason;
          throw new LockLostError(
            lostMessage(held.key, 'it was lost before the transaction committed'),
            { key: held.key },
          );
        }
      }
      // The local deadline runs ahead of the server's: past it, do not commit either.
      if (handle.signal.aborted) throw handle.signal.reason;
      // Given up on meanwhile (the call rejected, its lock released): never committed now.
      if (ending.expired) throw givenUp();
      ending.arm(
        store.answerWithinMs + (options.maxCommitTimeMS ?? 0),
        () =>
          new TransactionOutcomeUnknownError(
            `The transaction under ${named} may or may not have committed: MongoDB did not ` +
              `answer its commit within ${store.answerWithinMs + (options.maxCommitTimeMS ?? 0)} ms`,
          ),
      );
    }, transactionOptions);
    transaction.catch(() => undefined);
    await Promise.race([transaction, ending.passed]);
    if (endedByWork) throw endedByWork;
    onCommitted();
    return result;
  } catch (error) {
    // A commit with no answer, or a failed abort (the driver ignores it), may leave the
    // transaction open holding the lock's line (the check wrote it): every command on the key,
    // the release included, would wait for it.
    await store.endTransactionOf(session);
    const commitUnknown =
      error instanceof MongoError && error.hasErrorLabel('UnknownTransactionCommitResult');
    if (commitUnknown && error !== workError) {
      throw new TransactionOutcomeUnknownError(
        `The transaction under ${named} may or may not have committed: ${error.message}`,
        { cause: error },
      );
    }
    throw error;
  } finally {
    ending.disarm();
    resumeRenewal();
    handle.session = undefined;
    // Given up on, the driver may still wait for MongoDB to end it: not the caller.
    const endingSession = session.endSession().catch(() => undefined);
    if (!ending.expired) await endingSession;
  }
}
