import { type Document, Long } from 'bson';
import type { CommandContext } from '../commands/context';
import { ChangeStreamCursor } from './change-stream-cursor';

/**
 * Codes after which a change stream can resume. Since 4.4 drivers resume only on errors the
 * server labels ResumableChangeStreamError (or network errors), so the label matters.
 */
const RESUMABLE_CODES = new Set([
  6, 7, 43, 63, 89, 91, 133, 150, 189, 234, 262, 9001, 10107, 11600, 11602, 13388, 13435, 13436,
]);

/** Whether the command reads a change stream (opening aggregate, or getMore on one). */
export function isChangeStreamCommand(context: CommandContext): boolean {
  const { command } = context;
  const name = context.name.toLowerCase();
  if (name === 'aggregate') {
    const first = Array.isArray(command.pipeline)
      ? (command.pipeline[0] as Document | undefined)
      : undefined;
    return !!first && '$changeStream' in first;
  }
  if (name !== 'getmore') return false;
  const raw: unknown = command.getMore;
  const id = raw instanceof Long ? raw.toNumber() : Number(raw);
  return context.server.cursors.get(id) instanceof ChangeStreamCursor;
}

export function withResumableLabel(isChangeStream: boolean, reply: Document): Document {
  if (!isChangeStream || reply.ok !== 0 || !RESUMABLE_CODES.has(Number(reply.code))) return reply;
  const labels = new Set<string>((reply.errorLabels as string[] | undefined) ?? []);
  labels.add('ResumableChangeStreamError');
  return { ...reply, errorLabels: [...labels] };
}
