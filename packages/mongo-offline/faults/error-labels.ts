import type { Document } from 'bson';
import type { CommandContext } from '../commands/context';

/** Error codes for which MongoDB labels a retryable write's failure RetryableWriteError. */
const RETRYABLE_WRITE_CODES = new Set([
  6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436,
]);
/** Errors that abort a transaction in a way the whole transaction may be retried after. */
const TRANSIENT_TRANSACTION_CODES = new Set([24, 112, 251, 267]);
const RETRYABLE_WRITE_COMMANDS = ['insert', 'update', 'delete', 'findandmodify'];
const TRANSACTION_END_COMMANDS = ['committransaction', 'aborttransaction'];

function addLabel(reply: Document, label: string): Document {
  const labels = new Set<string>((reply.errorLabels as string[] | undefined) ?? []);
  labels.add(label);
  return { ...reply, errorLabels: [...labels] };
}

function failureCode(reply: Document): number {
  return reply.ok === 0
    ? Number(reply.code)
    : Number((reply.writeConcernError as Document | undefined)?.code);
}

/**
 * The labels a real server attaches to a failure: RetryableWriteError on retryable writes
 * and on commit/abort, TransientTransactionError on statements of a transaction.
 */
export function withServerErrorLabels(context: CommandContext, reply: Document): Document {
  const { command } = context;
  const name = context.name.toLowerCase();
  const code = failureCode(reply);
  let labelled = reply;
  const retryableWrite =
    command.txnNumber !== undefined &&
    command.autocommit === undefined &&
    RETRYABLE_WRITE_COMMANDS.includes(name);
  if (
    (retryableWrite || TRANSACTION_END_COMMANDS.includes(name)) &&
    RETRYABLE_WRITE_CODES.has(code)
  ) {
    labelled = addLabel(labelled, 'RetryableWriteError');
  }
  const inTransaction = command.autocommit === false;
  if (inTransaction && reply.ok === 0) {
    // Not-primary and network-like errors are transient for statements, not for the commit.
    const statementTransient =
      !TRANSACTION_END_COMMANDS.includes(name) && RETRYABLE_WRITE_CODES.has(code);
    if (TRANSIENT_TRANSACTION_CODES.has(code) || statementTransient)
      labelled = addLabel(labelled, 'TransientTransactionError');
  }
  return labelled;
}
