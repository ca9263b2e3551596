import { spawnOfflineMongo } from './offline-mongo-process';

export interface FaultServer {
  uri: string;
  /** `'uri'`: MONGODB_URI, a real deployment; `'offline'`: the test server in its own process. */
  kind: 'uri' | 'offline';
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
  return { uri: server.uri, kind: 'offline', stop: server.stop };
}
