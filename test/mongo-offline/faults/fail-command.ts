import type { Document } from 'bson';
import type { CommandContext } from '../commands/context';
import { codeNameOf } from '../commands/errors';

/** Error codes for which MongoDB labels a retryable write's failure RetryableWriteError. */
const RETRYABLE_WRITE_CODES = new Set([
  6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436,
]);

export function isRetryableWriteAttempt(context: CommandContext): boolean {
  const { command } = context;
  const name = context.name.toLowerCase();
  return (
    command.txnNumber !== undefined &&
    command.autocommit === undefined &&
    ['insert', 'update', 'delete', 'findandmodify'].includes(name)
  );
}

/** Adds RetryableWriteError where a real server would (retryable write, retryable code). */
export function withRetryableLabel(context: CommandContext, reply: Document): Document {
  if (!isRetryableWriteAttempt(context)) return reply;
  const code =
    reply.ok === 0
      ? Number(reply.code)
      : Number((reply.writeConcernError as Document | undefined)?.code);
  if (!RETRYABLE_WRITE_CODES.has(code)) return reply;
  const labels = new Set<string>((reply.errorLabels as string[] | undefined) ?? []);
  labels.add('RetryableWriteError');
  return { ...reply, errorLabels: [...labels] };
}

function applies(data: Document, context: CommandContext): boolean {
  const commands = Array.isArray(data.failCommands) ? (data.failCommands as string[]) : [];
  if (!commands.some((name) => name.toLowerCase() === context.name.toLowerCase())) return false;
  if (typeof data.appName === 'string' && data.appName !== context.connection.appName) return false;
  return true;
}

export type FailCommandOutcome =
  | { kind: 'none' }
  | { kind: 'close' }
  | { kind: 'error'; reply: Document }
  | { kind: 'afterwards'; decorate: (reply: Document) => Document };

/** Applies `failCommand` to one command: block, then close, fail, or run and decorate. */
export async function applyFailCommand(context: CommandContext): Promise<FailCommandOutcome> {
  const data = context.server.failPoints.fire('failCommand', (candidate) =>
    applies(candidate, context),
  );
  if (!data) return { kind: 'none' };
  if (data.blockConnection === true) {
    await new Promise((resolve) => setTimeout(resolve, Number(data.blockTimeMS ?? 0)));
  }
  if (data.closeConnection === true) return { kind: 'close' };
  const errorLabels = data.errorLabels as string[] | undefined;
  if (data.errorCode !== undefined) {
    const code = Number(data.errorCode);
    const reply: Document = {
      ok: 0,
      errmsg: "Failing command via 'failCommand' failpoint",
      code,
      codeName: codeNameOf(code),
    };
    if (errorLabels) reply.errorLabels = errorLabels;
    return { kind: 'error', reply: errorLabels ? reply : withRetryableLabel(context, reply) };
  }
  const writeConcernError = data.writeConcernError as Document | undefined;
  return {
    kind: 'afterwards',
    decorate: (reply) => {
      if (!writeConcernError || reply.ok !== 1) return reply;
      const decorated: Document = { ...reply, writeConcernError };
      if (errorLabels) decorated.errorLabels = errorLabels;
      return errorLabels ? decorated : withRetryableLabel(context, decorated);
    },
  };
}
