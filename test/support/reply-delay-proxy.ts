import type { Server, Socket, AddressInfo } from 'node:net';
import { connect as netConnect, createServer } from 'node:net';

/** The command name of an OP_MSG request (its body's first key), lower-cased. */
function commandNameOf(message: Buffer): string | undefined {
  const OP_MSG = 2013;
  // header (16) + flagBits (4) + section kind 0 (1) + BSON length (4) + element type (1)
  if (message.length < 27 || message.readInt32LE(12) !== OP_MSG || message[20] !== 0) {
    return undefined;
  }
  const end = message.indexOf(0, 26);
  return end < 0 ? undefined : message.toString('utf8', 26, end).toLowerCase();
}

/**
 * A TCP proxy in front of the test server that can hold back the reply to one command: the
 * command runs on the server at once, its reply reaches the client `delayMs` later. That is
 * a reply delayed after the write, which `blockConnection` (it blocks before the command
 * runs) cannot make.
 */
export class ReplyDelayProxy {
  port = 0;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private armed: { command: string; delayMs: number; held: () => void } | undefined;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = createServer((client) => this.pipe(client));
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Resolves once the reply to the next `command` has arrived and is being held back. */
  holdNextReply(command: string, delayMs: number): Promise<void> {
    return new Promise((held) => {
      this.armed = { command: command.toLowerCase(), delayMs, held };
    });
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private pipe(client: Socket): void {
    const upstream = netConnect(this.target.port, this.target.host);
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('close', () => {
        this.sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
      socket.on('error', () => socket.destroy());
    }
    let unread = Buffer.alloc(0);
    let holdNext: { delayMs: number; held: () => void } | undefined;
    let holding: Buffer[] | undefined;
    client.on('data', (chunk: Buffer) => {
      unread = Buffer.concat([unread, chunk]);
      while (unread.length >= 4 && unread.length >= unread.readInt32LE(0)) {
        const message = unread.subarray(0, unread.readInt32LE(0));
        unread = unread.subarray(message.length);
        if (this.armed && commandNameOf(message) === this.armed.command) {
          holdNext = this.armed;
          this.armed = undefined;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (holding) {
        holding.push(chunk);
        return;
      }
      if (!holdNext) {
        client.write(chunk);
        return;
      }
      // A driver never pipelines on one connection: this is the held command's reply.
      const { delayMs, held } = holdNext;
      holdNext = undefined;
      holding = [chunk];
      held();
      setTimeout(() => {
        const chunks = holding ?? [];
        holding = undefined;
        for (const part of chunks) client.write(part);
      }, delayMs);
    });
  }
}

/**
 * Runs `body` with a proxy in front of `kit`'s server (`uri` reaches the server through it),
 * then closes the kit's services before the proxy, so none waits on a connection it cut.
 */
export async function withReplyDelayProxy(
  kit: { mongo: { uri: string }; cleanup(): Promise<void> },
  body: (proxy: ReplyDelayProxy, uri: string) => Promise<void>,
): Promise<void> {
  const target = new URL(kit.mongo.uri);
  const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
  await proxy.start();
  try {
    await body(proxy, `mongodb://127.0.0.1:${proxy.port}/?directConnection=true`);
  } finally {
    await kit.cleanup();
    await proxy.stop();
  }
}
