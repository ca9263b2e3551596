import type { Socket } from 'node:net';
import type { Document } from 'bson';
import { dispatchCommand, decorateReply, errorReply } from './commands/dispatcher';
import { CommandError } from './commands/errors';
import type { ConnectionInfo } from './commands/context';
import type { ServerState } from './server-state';
import {
  type DecodedRequest,
  decodeMessage,
  encodeOpMsgReply,
  encodeOpReply,
  serializeReply,
} from './wire/codec';
import { MessageFramer } from './wire/message-framer';
import { OP_QUERY } from './wire/opcodes';

/** Whether `reply` answers an awaitable hello whose client takes a stream of replies. */
function streams(request: DecodedRequest, reply: Document): boolean {
  const name = (Object.keys(request.command)[0] ?? '').toLowerCase();
  return (
    request.exhaustAllowed &&
    (name === 'hello' || name === 'ismaster') &&
    request.command.maxAwaitTimeMS !== undefined &&
    reply.ok === 1
  );
}

/** OP_QUERY is only for the handshake since MongoDB 6.0 (server code 352 otherwise). */
const OP_QUERY_COMMANDS = new Set(['hello', 'ismaster']);

let lastReplyId = 0;

/**
 * One client socket. Messages are handled one after another (a driver never pipelines on a
 * connection); different connections run concurrently. Anything malformed closes only this
 * connection.
 */
export class ServerConnection implements ConnectionInfo {
  readonly id: number;
  appName?: string;
  private readonly framer = new MessageFramer();
  private queue: Promise<void> = Promise.resolve();
  /** Aborted once this connection closes, by us or by the peer: what awaitable hellos wait on. */
  private readonly closed = new AbortController();

  constructor(
    private readonly server: ServerState,
    private readonly socket: Socket,
  ) {
    this.id = server.nextConnectionId();
    server.openConnections += 1;
    socket.setNoDelay(true);
    socket.on('data', (chunk) => this.onData(chunk));
    socket.on('error', () => this.close());
    socket.on('close', () => {
      server.openConnections -= 1;
      this.closed.abort();
    });
  }

  close(): void {
    this.closed.abort();
    this.socket.destroy();
  }

  get closing(): AbortSignal {
    return this.closed.signal;
  }

  private get isClosed(): boolean {
    return this.closed.signal.aborted;
  }

  private onData(chunk: Buffer): void {
    let messages: Buffer[];
    try {
      messages = this.framer.push(chunk);
    } catch {
      this.close();
      return;
    }
    for (const message of messages) {
      // A bug while answering ends this connection only, never the process.
      this.queue = this.queue.then(() => this.handle(message)).catch(() => this.close());
    }
  }

  private async handle(message: Buffer): Promise<void> {
    if (this.isClosed) return;
    let request: DecodedRequest;
    try {
      request = decodeMessage(message);
    } catch {
      this.close();
      return;
    }
    const reply = await this.run(request);
    if (request.moreToCome || this.isClosed || !reply) return;
    if (streams(request, reply)) await this.stream(request, reply);
    else this.send(request, reply);
  }

  /**
   * A streaming hello (exhaust): each reply says more are to come, and the next one is the
   * answer to the same hello with the topologyVersion just sent, until the socket closes.
   */
  private async stream(request: DecodedRequest, first: Document): Promise<void> {
    let reply: Document | undefined = first;
    let responseTo = request.requestId;
    while (reply && !this.isClosed) {
      if (!streams(request, reply)) {
        this.send(request, reply, responseTo);
        return;
      }
      responseTo = this.send(request, reply, responseTo, true);
      request.command.topologyVersion = reply.topologyVersion;
      reply = await this.run(request);
    }
  }

  private async run(request: DecodedRequest): Promise<Document | undefined> {
    const name = (Object.keys(request.command)[0] ?? '').toLowerCase();
    if (name === 'hello' || name === 'ismaster') this.rememberClient(request.command);
    if (request.opCode === OP_QUERY && !OP_QUERY_COMMANDS.has(name)) {
      const error = new CommandError(
        352,
        `Unsupported OP_QUERY command: ${name}. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal`,
      );
      return decorateReply(this.server, error.toReply());
    }
    try {
      return await dispatchCommand(this.server, request.db, request.command, this);
    } catch (error) {
      return decorateReply(this.server, errorReply(error));
    }
  }

  private rememberClient(command: Document): void {
    const client = command.client as Document | undefined;
    const application = client?.application as Document | undefined;
    if (typeof application?.name === 'string') this.appName = application.name;
  }

  /** Sends `reply`; returns its requestId (the next reply of a stream responds to it). */
  private send(
    request: DecodedRequest,
    reply: Document,
    responseTo = request.requestId,
    moreToCome = false,
  ): number {
    let body: Buffer;
    try {
      body = serializeReply(reply);
    } catch (error) {
      body = serializeReply(decorateReply(this.server, errorReply(error)));
    }
    lastReplyId = (lastReplyId + 1) & 0x7fffffff;
    this.socket.write(
      request.opCode === OP_QUERY
        ? encodeOpReply(body, responseTo, lastReplyId)
        : encodeOpMsgReply(body, responseTo, lastReplyId, moreToCome),
    );
    return lastReplyId;
  }
}
