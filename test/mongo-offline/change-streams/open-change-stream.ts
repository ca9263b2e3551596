import type { Document } from 'bson';
import type { CommandContext } from '../commands/context';
import { CommandError } from '../commands/errors';

export async function openChangeStream(
  context: CommandContext,
  _pipeline: Document[],
): Promise<Document> {
  if (!context.server.options.replicaSet) {
    throw new CommandError(40573, 'The $changeStream stage is only supported on replica sets');
  }
  throw new CommandError(115, 'change streams: not yet implemented');
}
