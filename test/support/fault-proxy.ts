import { once } from 'node:events';
import * as net from 'node:net';
import { Pipe, type PipeContext, type ProxyMode } from './fault-proxy-pipe';

export type { ProxyMode } from './fault-proxy-pipe';

/** Forwards every byte as it comes. */
export const passThrough: ProxyMode = {};

export interface ProxyCounters {
  /** Connections accepted since start. */
  connections: number;
  /** Connections open now. */
  open: number;
  /** Connections reset in the middle of a server→client chunk. */
  resets: number;
  /** Connections reset when a `blackHole: 'drop'` ended. */
  dropped: number;
  /** Bytes forwarded client→server and server→client. */
  bytesUp: number;
  bytesDown: number;
  /** Timers pending in the pipes (latency, drip). */
  timers: number;
}

/** One client connection and its upstream twin. */
class ProxiedConnection {
  readonly up: Pipe;
  readonly down: Pipe;
  readonly closed: Promise<void>;

  constructor(
    readonly client: net.Socket,
    readonly server: net.Socket,
    context: (reply: boolean, connection: ProxiedConnection) => PipeContext,
  ) {
    this.up = new Pipe(server, false, context(false, this));
    this.down = new Pipe(client, true, context(true, this));
    for (const socket of [client, server]) {
      socket.setNoDelay(true);
      // A reset or refused peer: 'close' follows, which is all that matters here.
      socket.on('error', () => undefined);
    }
    client.on('data', (chunk: Buffer) => this.up.push(chunk));
    server.on('data', (chunk: Buffer) => this.down.push(chunk));
    // A side that is gone still gets its queued bytes delivered to the other side, then FIN.
    client.on('end', () => this.up.end());
    server.on('end', () => this.down.end());
    client.on('close', () => {
      this.down.close();
      this.up.end();
    });
    server.on('close', () => {
      this.up.close();
      this.down.end();
    });
    const closing = (socket: net.Socket) =>
      new Promise<void>((resolve) => socket.once('close', () => resolve()));
    this.closed = Promise.all([closing(client), closing(server)]).then(() => {
      this.up.close();
      this.down.close();
    });
  }

  pump(): void {
    this.up.pump();
    this.down.pump();
  }

  destroy(reset: boolean): void {
    this.up.close();
    this.down.close();
    if (reset && !this.client.destroyed) this.client.resetAndDestroy();
    else this.client.destroy();
    this.server.destroy();
  }
}

/**
 * A TCP proxy on 127.0.0.1 in front of one server, for network faults that `failCommand` cannot
 * make: latency with jitter, black holes, connections reset in the middle of a reply, replies
 * that drip in. The process that starts it switches modes at run time with `setMode`.
 */
export class FaultProxy {
  private listener: net.Server | undefined;
  private readonly connections = new Set<ProxiedConnection>();
  private current: ProxyMode = passThrough;
  private readonly stats = { connections: 0, resets: 0, dropped: 0, bytesUp: 0, bytesDown: 0 };

  constructor(
    private readonly target: { host: string; port: number },
    private readonly random: () => number = Math.random,
  ) {}

  /** Listens on an ephemeral port of 127.0.0.1 (never another address); returns the port. */
  async start(): Promise<number> {
    if (this.listener) return this.port;
    const listener = net.createServer({ allowHalfOpen: true }, (client) => this.accept(client));
    listener.listen(0, '127.0.0.1');
    await once(listener, 'listening');
    this.listener = listener;
    return this.port;
  }

  get port(): number {
    const address = this.listener?.address();
    if (!address || typeof address === 'string') throw new Error('fault proxy not started');
    return address.port;
  }

  get mode(): ProxyMode {
    return this.current;
  }

  /** Switches mode for bytes forwarded from now on (see `ProxyMode` for black holes ending). */
  setMode(mode: ProxyMode): void {
    const endingHole = this.current.blackHole && !mode.blackHole ? this.current.blackHole : null;
    this.current = mode;
    for (const connection of this.connections) {
      if (endingHole === 'drop') {
        this.stats.dropped++;
        connection.destroy(true);
      } else connection.pump();
    }
  }

  get counters(): ProxyCounters {
    let timers = 0;
    for (const c of this.connections) timers += Number(c.up.hasTimer) + Number(c.down.hasTimer);
    return { ...this.stats, open: this.connections.size, timers };
  }

  /** Stops listening and destroys every connection, its queued bytes and timers. */
  async stop(): Promise<void> {
    const listener = this.listener;
    if (!listener) return;
    this.listener = undefined;
    const closed = new Promise<void>((resolve) => listener.close(() => resolve()));
    const connections = [...this.connections];
    for (const connection of connections) connection.destroy(false);
    await Promise.all([closed, ...connections.map((c) => c.closed)]);
  }

  private accept(client: net.Socket): void {
    this.stats.connections++;
    const server = net.connect({ ...this.target, allowHalfOpen: true });
    const connection = new ProxiedConnection(client, server, (reply, self) => ({
      mode: () => this.current,
      random: this.random,
      forwarded: (bytes) =>
        reply ? (this.stats.bytesDown += bytes) : (this.stats.bytesUp += bytes),
      reset: () => {
        this.stats.resets++;
        self.destroy(true);
      },
    }));
    this.connections.add(connection);
    void connection.closed.then(() => this.connections.delete(connection));
  }
}

/**
 * The host and port a proxy should forward to: the first host of a `mongodb://` URI (a
 * `mongodb+srv://` URI names no host to forward to).
 */
export function proxyTarget(uri: string): { host: string; port: number } {
  const match = /^mongodb:\/\/(?:[^@/]*@)?([^/?,]+)/.exec(uri);
  if (!match) throw new Error('a fault proxy needs a mongodb:// URI with a host');
  const hostPort = /^\[([^\]]+)\](?::(\d+))?$|^([^:]+)(?::(\d+))?$/.exec(match[1]);
  if (!hostPort) throw new Error('unreadable host in the URI');
  return {
    host: hostPort[1] ?? hostPort[3],
    port: Number(hostPort[2] ?? hostPort[4] ?? 27017),
  };
}

/**
 * The URI of `serverUri` through a proxy on `port`: same credentials, database and options,
 * host replaced by 127.0.0.1:port, `replicaSet` removed and `directConnection=true` added.
 * With `replicaSet`, the driver would learn the real address from `hello` and leave the proxy.
 */
export function proxiedUri(
  serverUri: string,
  port: number,
  extraOptions: Record<string, string> = {},
): string {
  const match = /^mongodb:\/\/([^@/]*@)?[^/?]+(\/[^?]*)?(?:\?(.*))?$/.exec(serverUri);
  if (!match) throw new Error('a fault proxy needs a mongodb:// URI');
  const [, credentials = '', path = '/', query = ''] = match;
  const options = new URLSearchParams(query);
  options.delete('replicaSet');
  options.set('directConnection', 'true');
  for (const [name, value] of Object.entries(extraOptions)) options.set(name, value);
  return `mongodb://${credentials}127.0.0.1:${port}${path}?${options.toString()}`;
}
