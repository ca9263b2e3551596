import type { Document } from 'bson';
import { CommandError } from '../commands/errors';
import type { Storage } from '../engine/storage';
import { lsidKey } from './lsid-key';
import { TransactionView } from './transaction-view';

export interface TransactionState {
  txnNumber: number;
  status: 'inProgress' | 'committed' | 'aborted';
  view: TransactionView;
  /** Aborts the transaction once it has been open `transactionLifetimeLimitSeconds`. */
  expiry: NodeJS.Timeout;
}

/** setTimeout's longest delay (about 24.8 days); a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function lifetimeMs(seconds: number): number {
  return Math.min(seconds * 1000, MAX_TIMER_MS);
}

function noSuchTransaction(message: string): CommandError {
  return new CommandError(251, message, { errorLabels: ['TransientTransactionError'] });
}

/**
 * The multi-document transaction of each session (one at a time, as in MongoDB). As a mongod's
 * does, a transaction still open after `lifetimeSeconds()` (the parameter
 * `transactionLifetimeLimitSeconds`, default 60) is aborted: a client that died mid-transaction
 * holds its documents no longer.
 */
export class Transactions {
  private readonly bySession = new Map<string, TransactionState>();

  constructor(
    private readonly storage: Storage,
    private readonly lifetimeSeconds: () => number,
  ) {}

  begin(lsid: Document, txnNumber: number): TransactionState {
    const key = lsidKey(lsid)!;
    const existing = this.bySession.get(key);
    if (existing && txnNumber < existing.txnNumber) {
      throw new CommandError(
        225,
        `Cannot start transaction ${txnNumber} on session because a newer transaction ${existing.txnNumber} has already started.`,
      );
    }
    if (existing && txnNumber === existing.txnNumber) {
      throw new CommandError(
        263,
        `Transaction ${txnNumber} has already been started on this session.`,
      );
    }
    if (existing?.status === 'inProgress') this.abort(existing);
    const state: TransactionState = {
      txnNumber,
      status: 'inProgress',
      view: new TransactionView(this.storage, { lsid, txnNumber }),
      expiry: setTimeout(() => this.abort(state), lifetimeMs(this.lifetimeSeconds())).unref(),
    };
    this.bySession.set(key, state);
    return state;
  }

  /** The in-progress transaction this statement belongs to, or NoSuchTransaction. */
  continue(lsid: Document, txnNumber: number): TransactionState {
    const state = this.bySession.get(lsidKey(lsid)!);
    if (!state || state.txnNumber !== txnNumber) {
      throw noSuchTransaction(
        `Given transaction number ${txnNumber} does not match any in-progress transactions.`,
      );
    }
    if (state.status !== 'inProgress')
      throw noSuchTransaction(`Transaction with { txnNumber: ${txnNumber} } has been aborted.`);
    return state;
  }

  commit(lsid: Document, txnNumber: number): void {
    const state = this.bySession.get(lsidKey(lsid)!);
    if (state && state.txnNumber === txnNumber && state.status === 'committed') return; // retried commit
    const active = this.continue(lsid, txnNumber);
    clearTimeout(active.expiry);
    try {
      active.view.commit();
      active.status = 'committed';
    } catch (error) {
      // Replayed in part (a unique key taken meanwhile: only `_id`s are locked here); it ends
      // all the same, so that no write waits for it and its documents are free.
      active.status = 'aborted';
      throw error;
    }
  }

  abortCommand(lsid: Document, txnNumber: number): void {
    const state = this.bySession.get(lsidKey(lsid)!);
    if (state && state.txnNumber === txnNumber && state.status === 'committed') {
      throw new CommandError(256, 'Transaction has been committed.');
    }
    if (!state || state.txnNumber !== txnNumber || state.status !== 'inProgress') {
      throw noSuchTransaction(`Transaction with { txnNumber: ${txnNumber} } has been aborted.`);
    }
    this.abort(state);
  }

  abort(state: TransactionState): void {
    if (state.status !== 'inProgress') return;
    clearTimeout(state.expiry);
    state.view.release();
    state.status = 'aborted';
  }

  /** endSessions / killSessions: abort whatever the sessions had open. */
  endSession(lsid: Document | undefined): void {
    const key = lsidKey(lsid);
    if (!key) return;
    const state = this.bySession.get(key);
    if (state) this.abort(state);
    this.bySession.delete(key);
  }

  abortAll(): void {
    for (const state of this.bySession.values()) this.abort(state);
    this.bySession.clear();
  }
}
