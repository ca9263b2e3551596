import type { Document } from 'bson';
import type { CommandContext, CommandHandler } from '../commands/context';
import { CommandError } from '../commands/errors';
import { NO_REPLY } from '../commands/no-reply';
import { lsidKey } from './lsid-key';
import { RETRYABLE_WRITE_COMMANDS } from './retryable-writes';

/** Statements MongoDB accepts inside a multi-document transaction. */
const TRANSACTION_COMMANDS = new Set([
  'find',
  'getmore',
  'killcursors',
  'insert',
  'update',
  'delete',
  'findandmodify',
  'aggregate',
  'distinct',
  'create',
  'createindexes',
  'bulkwrite',
  'committransaction',
  'aborttransaction',
]);

/**
 * Read concern levels MongoDB refuses in a transaction's first statement: mongod's
 * `_extractReadConcern` (src/mongo/db/service_entry_point_common.cpp) fails it with
 * InvalidOptions unless `isReadConcernLevelAllowedInTransaction` (transaction_validation.cpp:
 * local, majority, snapshot; no level is local), and the transaction never starts: its abort is
 * NoSuchTransaction (jstests/core/txns/read_concerns.js).
 */
const LEVELS_REFUSED_IN_TRANSACTION = new Set(['available', 'linearizable']);

function numberOf(value: unknown): number {
  return typeof value === 'number' ? value : Number(value);
}

/**
 * Routes a command through its session: multi-document transactions (`autocommit: false`)
 * and retryable writes (`txnNumber` alone). Everything else runs as is.
 */
export async function runInSession(
  context: CommandContext,
  handler: CommandHandler,
): Promise<Document> {
  const { command, server } = context;
  if (command.txnNumber === undefined) return handler(context);
  if (!server.options.replicaSet) {
    throw new CommandError(
      20,
      'Transaction numbers are only allowed on a replica set member or mongos',
    );
  }
  const lsid = command.lsid as Document | undefined;
  if (!lsid)
    throw new CommandError(
      50768,
      'txnNumber may only be provided for multi-document transactions and retryable write commands. Please provide an lsid.',
    );
  const txnNumber = numberOf(command.txnNumber);
  const name = context.name.toLowerCase();
  return server.sessionCheckouts.run(lsidKey(lsid)!, async () => {
    if (command.autocommit === false)
      return runTransactionStatement(context, handler, lsid, txnNumber, name);
    if (RETRYABLE_WRITE_COMMANDS.has(name))
      return runRetryableWrite(context, handler, lsid, txnNumber);
    return handler(context);
  });
}

async function runTransactionStatement(
  context: CommandContext,
  handler: CommandHandler,
  lsid: Document,
  txnNumber: number,
  name: string,
): Promise<Document> {
  const { transactions } = context.server;
  if (!TRANSACTION_COMMANDS.has(name)) {
    throw new CommandError(263, `Cannot run '${context.name}' in a multi-document transaction.`);
  }
  if (name === 'committransaction') {
    transactions.commit(lsid, txnNumber);
    return { ok: 1 };
  }
  if (name === 'aborttransaction') {
    transactions.abortCommand(lsid, txnNumber);
    return { ok: 1 };
  }
  const level = (context.command.readConcern as Document | undefined)?.level;
  if (context.command.startTransaction === true && LEVELS_REFUSED_IN_TRANSACTION.has(level)) {
    throw new CommandError(
      72,
      "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction",
    );
  }
  const state =
    context.command.startTransaction === true
      ? transactions.begin(lsid, txnNumber)
      : transactions.continue(lsid, txnNumber);
  context.storage = state.view;
  try {
    const reply = await handler(context);
    // A failed write aborts the transaction, as on MongoDB.
    if (reply.writeErrors) transactions.abort(state);
    return reply;
  } catch (error) {
    transactions.abort(state);
    throw error;
  }
}

async function runRetryableWrite(
  context: CommandContext,
  handler: CommandHandler,
  lsid: Document,
  txnNumber: number,
): Promise<Document> {
  const { retryableWrites, failPoints } = context.server;
  const previous = retryableWrites.previousReply(lsid, txnNumber);
  if (previous) return previous;
  // MongoDB's onPrimaryTransactionalWrite: fail before commit and/or drop the connection.
  const failPoint = failPoints.fire('onPrimaryTransactionalWrite', () => true);
  const closeConnection = failPoint !== undefined && failPoint.closeConnection !== false;
  if (failPoint?.failBeforeCommitExceptionCode !== undefined) {
    if (closeConnection) {
      context.connection.close();
      return NO_REPLY;
    }
    throw new CommandError(
      numberOf(failPoint.failBeforeCommitExceptionCode),
      'Failing write via onPrimaryTransactionalWrite fail point',
    );
  }
  const reply = await handler(context);
  if (reply.ok === 1) retryableWrites.record(lsid, txnNumber, reply);
  if (closeConnection) {
    context.connection.close();
    return NO_REPLY;
  }
  return reply;
}
