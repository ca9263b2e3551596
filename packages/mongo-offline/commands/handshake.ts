import { type Document, Long, ObjectId } from 'bson';
import { MAX_BSON_OBJECT_SIZE, MAX_MESSAGE_SIZE_BYTES } from '../wire/opcodes';
import { MAX_WIRE_VERSION, SERVER_VERSION, SET_NAME, type ServerState } from '../server-state';
import type { CommandContext, CommandHandler } from './context';
import { CommandError } from './errors';

/** The hello reply. No `compression`: never negotiated. */
export function helloReply(server: ServerState, connectionId: number, legacy: boolean): Document {
  const writable = server.isWritablePrimary;
  const reply: Document = {
    helloOk: true,
    topologyVersion: server.topologyVersion,
    [legacy ? 'ismaster' : 'isWritablePrimary']: writable,
  };
  if (server.options.replicaSet) {
    const lastOpTime = { ts: server.storage.clock.now(), t: Long.fromNumber(server.term) };
    const now = new Date();
    Object.assign(reply, {
      hosts: [server.hostAndPort],
      setName: SET_NAME,
      setVersion: 1,
      secondary: !writable,
      primary: writable ? server.hostAndPort : undefined,
      me: server.hostAndPort,
      electionId: server.electionId,
      lastWrite: {
        opTime: lastOpTime,
        lastWriteDate: now,
        majorityOpTime: lastOpTime,
        majorityWriteDate: now,
      },
    });
  }
  Object.assign(reply, {
    maxBsonObjectSize: MAX_BSON_OBJECT_SIZE,
    maxMessageSizeBytes: MAX_MESSAGE_SIZE_BYTES,
    maxWriteBatchSize: 100_000,
    localTime: new Date(),
    logicalSessionTimeoutMinutes: 30,
    connectionId,
    minWireVersion: 0,
    maxWireVersion: MAX_WIRE_VERSION,
    readOnly: false,
    ok: 1,
  });
  return reply;
}

/**
 * hello, awaitable as on MongoDB 4.4+: with `topologyVersion` and `maxAwaitTimeMS`, it answers
 * when the server's topologyVersion differs from the one given, or after `maxAwaitTimeMS`.
 * A driver that sees a topologyVersion streams it (exhaust, in `server-connection.ts`).
 */
const hello: CommandHandler = async (context) => {
  const { server, command } = context;
  const seen = command.topologyVersion as Document | undefined;
  if (command.maxAwaitTimeMS !== undefined || seen !== undefined) {
    // mongod's codes (jstests/replsets/awaitable_hello.js).
    if (seen === undefined || command.maxAwaitTimeMS === undefined) {
      throw new CommandError(31368, "'maxAwaitTimeMS' and 'topologyVersion' go together");
    }
    const maxAwaitTimeMS = command.maxAwaitTimeMS as unknown;
    if (typeof maxAwaitTimeMS !== 'number') {
      throw new CommandError(14, 'maxAwaitTimeMS must be a number');
    }
    if (maxAwaitTimeMS < 0) throw new CommandError(31373, 'maxAwaitTimeMS must be >= 0');
    if (sameTopology(server, seen)) {
      await topologyChange(server, maxAwaitTimeMS, context.connection.closing);
    }
  }
  return helloReply(server, context.connection.id, context.name.toLowerCase() === 'ismaster');
};

/** Whether `seen` is the server's current topologyVersion (a newer counter is refused). */
function sameTopology(server: ServerState, seen: Document): boolean {
  const current = server.topologyVersion;
  if (
    !(seen.processId instanceof ObjectId) ||
    !seen.processId.equals(current.processId as ObjectId)
  )
    return false;
  const counter = Number(seen.counter);
  if (counter < 0) throw new CommandError(31372, 'topologyVersion.counter cannot be negative');
  if (counter > Number(current.counter)) {
    throw new CommandError(
      31382,
      'Received a topology version with the same process ID and a higher counter than the server',
    );
  }
  return counter === Number(current.counter);
}

/**
 * Settles at the server's next topology change (or its stop), after `ms`, or when the
 * connection closes (nobody is left to answer).
 */
function topologyChange(server: ServerState, ms: number, closing: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      server.off('topologyChanged', done);
      closing.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms).unref();
    server.on('topologyChanged', done);
    closing.addEventListener('abort', done, { once: true });
    if (closing.aborted) done();
  });
}

const buildInfo: CommandHandler = () => {
  const [major, minor, patch] = SERVER_VERSION.split('.').map(Number);
  return {
    version: SERVER_VERSION,
    gitVersion: 'offline-test-server',
    versionArray: [major, minor, patch, 0],
    bits: 64,
    debug: false,
    maxBsonObjectSize: MAX_BSON_OBJECT_SIZE,
    storageEngines: ['memory'],
    modules: [],
    ok: 1,
  };
};

function getParameter(context: CommandContext): Document {
  const { command, server } = context;
  if (command.getParameter === '*') return { ...server.parameters, ok: 1 };
  const reply: Document = {};
  for (const key of Object.keys(command)) {
    if (key in server.parameters) reply[key] = server.parameters[key];
  }
  if (Object.keys(reply).length === 0) {
    return { ok: 0, errmsg: 'no option found to get', code: 72, codeName: 'InvalidOptions' };
  }
  return { ...reply, ok: 1 };
}

/** What a mongod refuses of a parameter's value: why, or undefined when it is good. */
const PARAMETER_CHECKS: Record<string, (value: unknown) => string | undefined> = {
  transactionLifetimeLimitSeconds: (value) =>
    typeof value === 'number' && value >= 1 ? undefined : 'must be a number of at least 1',
};

function setParameter(context: CommandContext): Document {
  const { command, server } = context;
  const reply: Document = {};
  for (const key of Object.keys(command)) {
    if (key === 'setParameter' || key.startsWith('$') || key === 'lsid') continue;
    if (!(key in server.parameters)) {
      return {
        ok: 0,
        errmsg: `attempted to set unrecognized parameter [${key}], use help:true to see options `,
        code: 72,
        codeName: 'InvalidOptions',
      };
    }
    const refusal = PARAMETER_CHECKS[key]?.(command[key]);
    if (refusal) throw new CommandError(2, `${key} ${refusal}`);
    reply.was = server.parameters[key];
    server.parameters[key] = command[key];
  }
  server.emitParameterChange();
  return { ...reply, ok: 1 };
}

export const handshakeCommands: Record<string, CommandHandler> = {
  hello,
  ismaster: hello,
  ping: () => ({ ok: 1 }),
  buildinfo: buildInfo,
  getparameter: getParameter,
  setparameter: setParameter,
  getcmdlineopts: () => ({ argv: ['mongod'], parsed: {}, ok: 1 }),
  serverstatus: (context) => ({
    host: context.server.hostAndPort,
    version: SERVER_VERSION,
    process: 'mongod',
    uptime: (Date.now() - context.server.startedAt.getTime()) / 1000,
    localTime: new Date(),
    connections: {
      current: context.server.openConnections,
      totalCreated: context.server.connectionsCreated,
    },
    metrics: { cursor: { open: { total: context.server.cursors.size } } },
    ok: 1,
  }),
  hostinfo: () => ({ system: { hostname: 'offline' }, os: {}, extra: {}, ok: 1 }),
  getlog: () => ({ totalLinesWritten: 0, log: [], ok: 1 }),
  whatsmyuri: (context) => ({ you: `127.0.0.1:${context.connection.id}`, ok: 1 }),
  refreshsessions: () => ({ ok: 1 }),
  startsession: () => ({ ok: 1 }),
  logout: () => ({ ok: 1 }),
  connectionstatus: () => ({
    authInfo: { authenticatedUsers: [], authenticatedUserRoles: [] },
    ok: 1,
  }),
  replsetgetstatus: (context) =>
    context.server.options.replicaSet
      ? {
          set: SET_NAME,
          myState: context.server.isWritablePrimary ? 1 : 2,
          members: [
            {
              _id: 0,
              name: context.server.hostAndPort,
              stateStr: context.server.isWritablePrimary ? 'PRIMARY' : 'SECONDARY',
            },
          ],
          ok: 1,
        }
      : { ok: 0, errmsg: 'not running with --replSet', code: 76, codeName: 'NoReplicationEnabled' },
};
