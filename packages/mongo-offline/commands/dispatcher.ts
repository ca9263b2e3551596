import { Binary, type Document, Long } from 'bson';
import { applyFailCommand } from '../faults/fail-command';
import { withServerErrorLabels } from '../faults/error-labels';
import { withWriteConcernOutcome } from '../faults/write-concern';
import type { ServerState } from '../server-state';
import { runInSession } from '../sessions/session-router';
import { isChangeStreamCommand, withResumableLabel } from '../change-streams/resumable-errors';
import { lsidKey } from '../sessions/lsid-key';
import { adminCommands } from './admin-commands';
import { aggregateCommands } from './aggregate';
import { catalogCommands } from './catalog-commands';
import { CommandContext, type CommandHandler, type ConnectionInfo } from './context';
import { CommandError } from './errors';
import { findAndModifyCommands } from './find-and-modify';
import { handshakeCommands } from './handshake';
import { indexCommands } from './index-commands';
import { NO_REPLY, isNoReply } from './no-reply';
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
  ...indexCommands,
  ...adminCommands,
};

const ZERO_HASH = new Binary(Buffer.alloc(20), 0);
const ZERO_KEY_ID = Long.fromNumber(0);
const ZERO_UID = new Binary(Buffer.alloc(32), 0);

/**
 * Runs one command: fail points first, then the session (transaction / retryable write),
 * then the handler. Errors become `ok: 0` replies; `undefined` means the connection was
 * closed instead of answering.
 */
export async function dispatchCommand(
  server: ServerState,
  db: string,
  command: Document,
  connection: ConnectionInfo,
): Promise<Document | undefined> {
  const name = Object.keys(command)[0] ?? '';
  const handler = HANDLERS[name.toLowerCase()];
  if (!handler)
    return decorateReply(server, new CommandError(59, `no such command: '${name}'`).toReply());
  const context = new CommandContext(server, db, name, command, connection);
  rememberSession(server, command.lsid as Document | undefined);
  const changeStream = isChangeStreamCommand(context);
  let reply: Document;
  try {
    const failure = await applyFailCommand(context);
    if (failure.kind === 'close') {
      connection.close();
      return undefined;
    }
    // failCommand errors get no ResumableChangeStreamError (the server attaches it only once
    // it has found the change stream's cursor, which failCommand fails before).
    if (failure.kind === 'error') return decorateReply(server, failure.reply);
    reply = await runInSession(context, handler);
    if (isNoReply(reply)) return undefined;
    reply = withWriteConcernOutcome(context, reply);
    if (failure.kind === 'afterwards') reply = failure.decorate(reply);
  } catch (error) {
    reply = withResumableLabel(changeStream, withServerErrorLabels(context, errorReply(error)));
  }
  return decorateReply(server, reply);
}

function rememberSession(server: ServerState, lsid: Document | undefined): void {
  const key = lsidKey(lsid);
  if (!key || !lsid) return;
  server.sessions.set(key, { _id: { id: lsid.id, uid: ZERO_UID }, lastUse: new Date() });
}

export function errorReply(error: unknown): Document {
  if (error instanceof CommandError) return error.toReply();
  const message = error instanceof Error ? error.message : String(error);
  return { ok: 0, errmsg: message, code: 1, codeName: 'InternalError' };
}

/**
 * NotPrimaryError codes: a mongod's errors with them carry its topologyVersion, so that a
 * driver can tell a stale one (from before a change it already knows of) from a new one.
 * Shutdown errors carry it only in quiesce mode, which this server has not.
 */
const NOT_PRIMARY_CODES = new Set([10107, 13435, 13436, 11602, 189]);

/** Every reply from a replica-set member gossips the cluster time. */
export function decorateReply(server: ServerState, reply: Document): Document {
  if (!server.options.replicaSet || reply === NO_REPLY) return reply;
  const clusterTime = server.storage.clock.now();
  const notPrimary = reply.ok === 0 && NOT_PRIMARY_CODES.has(reply.code as number);
  return {
    ...reply,
    ...(notPrimary ? { topologyVersion: server.topologyVersion } : {}),
    $clusterTime: { clusterTime, signature: { hash: ZERO_HASH, keyId: ZERO_KEY_ID } },
    operationTime: clusterTime,
  };
}
