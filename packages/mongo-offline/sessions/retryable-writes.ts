import type { Document } from 'bson';
import { CommandError } from '../commands/errors';
import { lsidKey } from './lsid-key';

interface ExecutedWrite {
  txnNumber: number;
  reply: Document;
}

/** Commands that are retryable writes when sent with a txnNumber outside a transaction. */
export const RETRYABLE_WRITE_COMMANDS = new Set(['insert', 'update', 'delete', 'findandmodify']);

/**
 * Remembers, per session, the reply of the latest retryable write so that a retry with the
 * same `lsid` + `txnNumber` gets the first result back instead of applying the write again.
 */
export class RetryableWrites {
  private readonly executed = new Map<string, ExecutedWrite>();

  /** The stored reply when this is a retry; throws for a txnNumber older than the session's. */
  previousReply(lsid: Document | undefined, txnNumber: number): Document | undefined {
    const key = lsidKey(lsid);
    if (!key) return undefined;
    const executed = this.executed.get(key);
    if (!executed) return undefined;
    if (txnNumber < executed.txnNumber) {
      throw new CommandError(
        225,
        `Retryable write with txnNumber ${txnNumber} is prohibited on session because a newer retryable write with txnNumber ${executed.txnNumber} has already started on this session.`,
      );
    }
    return txnNumber === executed.txnNumber ? executed.reply : undefined;
  }

  record(lsid: Document | undefined, txnNumber: number, reply: Document): void {
    const key = lsidKey(lsid);
    if (key) this.executed.set(key, { txnNumber, reply });
  }

  forget(lsid: Document | undefined): void {
    const key = lsidKey(lsid);
    if (key) this.executed.delete(key);
  }

  clear(): void {
    this.executed.clear();
  }
}
