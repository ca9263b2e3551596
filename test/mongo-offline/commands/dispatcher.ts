import { Binary, type Document, Long } from 'bson';
import type { ServerState } from '../server-state';
import { aggregateCommands } from './aggregate';
import { catalogCommands } from './catalog-commands';
import { CommandContext, type CommandHandler, type ConnectionInfo } from './context';
import { CommandError } from './errors';
import { findAndModifyCommands } from './find-and-modify';
import { handshakeCommands } from './handshake';
import { indexCommandsFor } from './index-commands';
import { readCommands } from './read-commands';
import { writeCommands } from './write-commands';

/** Command names are case-insensitive for lookup (`isMaster`, `findAndModify`...). */
const HANDLERS: Record<string, CommandHandler> = {
  ...handshakeCommands,
  ...writeCommands,
  ...findAndModifyCommands,
  ...readCommands,
  ...aggregateCommands,
  ...catalogCommands,
  ...indexCommandsFor(),
};

export function registerCommand(name: string, handler: CommandHandler): void {
  HANDLERS[name.toLowerCase()] = handler;
}

/** Runs one command and always returns a reply document (errors become ok:0 replies). */
export async function dispatchCommand(
  server: ServerState,
  db: string,
  command: Document,
  connection: ConnectionInfo,
): Promise<Document> {
  const name = Object.keys(command)[0] ?? '';
  const handler = HANDLERS[name.toLowerCase()];
  let reply: Document;
  try {
    if (!handler) throw new CommandError(59, `no such command: '${name}'`);
    const context = new CommandContext(server, db, name, command, connection);
    reply = await handler(context);
  } catch (error) {
    reply = errorReply(error);
  }
  return decorateReply(server, reply);
}

export function errorReply(error: unknown): Document {
  if (error instanceof CommandError) return error.toReply();
  const message = error instanceof Error ? error.message : String(error);
  return { ok: 0, errmsg: message, code: 1, codeName: 'InternalError' };
}

/** Every reply from a replica-set member gossips the cluster time. */
export function decorateReply(server: ServerState, reply: Document): Document {
  if (!server.options.replicaSet) return reply;
  const clusterTime = server.storage.clock.now();
  return {
    ...reply,
    $clusterTime: { clusterTime, signature: { hash: ZERO_HASH, keyId: ZERO_KEY_ID } },
    operationTime: clusterTime,
  };
}
const ZERO_HASH = new Binary(Buffer.alloc(20), 0);
const ZERO_KEY_ID = Long.fromNumber(0);
