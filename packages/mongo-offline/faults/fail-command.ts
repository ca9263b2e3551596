import type { Document } from 'bson';
import type { CommandContext } from '../commands/context';
import { codeNameOf } from '../commands/errors';
import { withServerErrorLabels } from './error-labels';

function applies(data: Document, context: CommandContext): boolean {
  const commands = Array.isArray(data.failCommands) ? (data.failCommands as string[]) : [];
  if (!commands.some((name) => name.toLowerCase() === context.name.toLowerCase())) return false;
  if (typeof data.appName === 'string' && data.appName !== context.connection.appName) return false;
  return true;
}

export type FailCommandOutcome =
  | { kind: 'none' }
  | { kind: 'close' }
  | { kind: 'error'; reply: Document; explicitLabels: boolean }
  | { kind: 'afterwards'; decorate: (reply: Document) => Document };

/** Applies `failCommand` to one command: block, then close, fail, or run and decorate. */
export async function applyFailCommand(context: CommandContext): Promise<FailCommandOutcome> {
  const data = context.server.failPoints.fire('failCommand', (candidate) =>
    applies(candidate, context),
  );
  if (!data) return { kind: 'none' };
  if (data.blockConnection === true) {
    await new Promise((resolve) => setTimeout(resolve, Number(data.blockTimeMS ?? 0)));
    context.startsRunning();
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
    if (errorLabels) return { kind: 'error', reply, explicitLabels: true };
    return { kind: 'error', reply: withServerErrorLabels(context, reply), explicitLabels: false };
  }
  const writeConcernError = data.writeConcernError as Document | undefined;
  return {
    kind: 'afterwards',
    decorate: (reply) => {
      if (!writeConcernError || reply.ok !== 1) return reply;
      const decorated: Document = { ...reply, writeConcernError };
      if (errorLabels) decorated.errorLabels = errorLabels;
      return errorLabels ? decorated : withServerErrorLabels(context, decorated);
    },
  };
}
