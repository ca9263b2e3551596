import { spawnOfflineMongo } from './offline-mongo-process';

export interface FaultServer {
  uri: string;
  /** `'uri'`: MONGODB_URI, a real deployment; `'offline'`: the test server in its own process. */
  kind: 'uri' | 'offline';
  /**
   * Sends a signal to the server's process (SIGSTOP: it stops answering, connections stay
   * open; SIGCONT: it goes on). Only the offline server has one; with MONGODB_URI it is absent.
   */
  signal?: (signal: NodeJS.Signals) => void;
  stop(): Promise<void>;
}

/**
 * One server that every process of a scenario shares. The offline server runs in its own
 * process so that pausing or killing a worker, or the test process's own load, never stops it.
 */
export async function startFaultServer(
  options: { standalone?: boolean } = {},
): Promise<FaultServer> {
  const fromEnv = process.env.MONGODB_URI;
  if (fromEnv && !options.standalone) {
    return { uri: fromEnv, kind: 'uri', stop: async () => undefined };
  }
  const server = await spawnOfflineMongo({ standalone: options.standalone });
  return { uri: server.uri, kind: 'offline', signal: server.signal, stop: server.stop };
}
