import { OfflineMongoServer } from './server';

export interface OfflineMongoOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  /** One-member replica set `rs0` (default) or a standalone. */
  replicaSet?: boolean;
  /** TTL monitor period; MongoDB's default is 60. */
  ttlMonitorSleepSecs?: number;
  host?: string;
}

export interface OfflineMongo {
  uri: string;
  port: number;
  stop(): Promise<void>;
}

/**
 * Starts the offline MongoDB test server in this process. Test infrastructure only: it is
 * not MongoDB (see README.md for what it emulates).
 *
 * @example
 * const mongo = await startOfflineMongo();
 * const client = await MongoClient.connect(mongo.uri);
 */
export async function startOfflineMongo(options: OfflineMongoOptions = {}): Promise<OfflineMongo> {
  const host = options.host ?? '127.0.0.1';
  const replicaSet = options.replicaSet ?? true;
  const server = new OfflineMongoServer({
    host,
    port: options.port ?? 0,
    replicaSet,
    ttlMonitorSleepSecs: options.ttlMonitorSleepSecs ?? 60,
  });
  const port = await server.listen();
  const query = replicaSet ? 'replicaSet=rs0' : 'directConnection=true';
  return { uri: `mongodb://${host}:${port}/?${query}`, port, stop: () => server.stop() };
}
