import { DocumentBusy } from '../engine/document-busy';
import type { CommandContext } from './context';
import { CommandError } from './errors';

/**
 * Runs a write statement. Where it meets a document that an open transaction wrote (it throws
 * `DocumentBusy` before writing anything), it waits until that transaction commits or aborts and
 * runs again, as a mongod makes such a write wait. It keeps the `$$NOW` it started with. The
 * wait ends with MaxTimeMSExpired at the command's `maxTimeMS`, and with
 * InterruptedDueToReplStateChange if the node stepped down meanwhile.
 */
export async function afterTransactions<T>(
  context: CommandContext,
  statement: () => T,
): Promise<T> {
  for (;;) {
    try {
      return statement();
    } catch (error) {
      if (!(error instanceof DocumentBusy)) throw error;
      await untilEnded(context, error.transactionEnded);
    }
  }
}

async function untilEnded(context: CommandContext, ended: Promise<void>): Promise<void> {
  const maxTimeMS = Number(context.command.maxTimeMS ?? 0);
  let timer: NodeJS.Timeout | undefined;
  const expired =
    maxTimeMS > 0
      ? new Promise<'expired'>((resolve) => {
          const leftMs = context.now.getTime() + maxTimeMS - Date.now();
          timer = setTimeout(() => resolve('expired'), Math.max(0, leftMs));
        })
      : new Promise<never>(() => undefined);
  const woke = await Promise.race([ended, expired]).finally(() => clearTimeout(timer));
  if (woke === 'expired') throw new CommandError(50, 'operation exceeded time limit');
  if (!context.server.isWritablePrimary) {
    throw new CommandError(
      11602,
      'operation was interrupted because a replica set state change occurred',
    );
  }
}
