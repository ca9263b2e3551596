import {
  prepareOfflineMongo,
  spawnOfflineMongo,
  type OfflineMongoProcess,
  type PreparedOfflineMongo,
} from './offline-mongo-process';

export interface FaultServer {
  uri: string;
  /** `'uri'`: MONGODB_URI, a real deployment; `'offline'`: the test server in its own process. */
  kind: 'uri' | 'offline';
  /**
   * Sends a signal to the server's process (SIGSTOP: it stops answering, connections stay
   * open; SIGCONT: it goes on). Only the offline server has one; with MONGODB_URI it is absent.
   */
  signal?: (signal: NodeJS.Signals) => void;
  /**
   * Only a `restartable` offline server: `kill` ends its process with SIGKILL (a crash) and
   * resolves once it is gone; `restart` (killing it first if need be) starts a new one on the
   * same port and resolves once it accepts connections. The new one starts afresh: every
   * document is lost.
   */
  kill?: () => Promise<void>;
  restart?: () => Promise<void>;
  /** Resolves once the next `restart` can start its server at once (it is loaded). */
  restartReady?: () => Promise<void>;
  stop(): Promise<void>;
}

/**
 * The scenarios' clients look at the server every 500 ms (`heartbeatFrequencyMS`), as the
 * drivers' own specification tests do: a shutdown error (91, 11600) that `failCommand` injects
 * comes with no change of role, and a driver that streams hello (MongoDB 4.4+) marks the
 * server Unknown until its next heartbeat, 10 s by default. (An injected NotPrimary error
 * carries the current topologyVersion and is ignored as stale; a real step-down is heard at
 * once.)
 */
function withFastHeartbeat(uri: string): string {
  if (/[?&]heartbeatFrequencyMS=/i.test(uri)) return uri;
  return `${uri}${uri.includes('?') ? '&' : '?'}heartbeatFrequencyMS=500`;
}

/**
 * One server that every process of a scenario shares. The offline server runs in its own
 * process so that pausing or killing a worker, or the test process's own load, never stops it.
 * A `restartable` one keeps its replacement loaded ahead of time, so that a restart takes
 * milliseconds, not the seconds ts-node needs to load a server.
 */
export async function startFaultServer(
  options: { standalone?: boolean; restartable?: boolean } = {},
): Promise<FaultServer> {
  const fromEnv = process.env.MONGODB_URI;
  if (fromEnv && !options.standalone) {
    return { uri: withFastHeartbeat(fromEnv), kind: 'uri', stop: async () => undefined };
  }
  const { standalone, restartable } = options;
  let server: OfflineMongoProcess = await spawnOfflineMongo({ standalone });
  const signal = (name: NodeJS.Signals) => server.signal(name);
  const uri = withFastHeartbeat(server.uri);
  if (!restartable) return { uri, kind: 'offline', signal, stop: () => server.stop() };
  const port = Number(new URL(server.uri).port);
  const prepare = () => {
    const prepared = prepareOfflineMongo({ standalone, port });
    prepared.catch(() => undefined);
    return prepared;
  };
  let next: Promise<PreparedOfflineMongo> = prepare();
  return {
    uri,
    kind: 'offline',
    signal,
    kill: () => server.kill(),
    restart: async () => {
      await server.kill();
      const replacement = await next;
      server = await replacement.listen();
      next = prepare();
    },
    restartReady: async () => {
      await next;
    },
    stop: async () => {
      await server.stop();
      await (await next.catch(() => undefined))?.discard();
    },
  };
}
