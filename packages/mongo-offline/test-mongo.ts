import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startOfflineMongo } from './index';

export type TestMongoKind = 'uri' | 'memory-server' | 'offline';

export interface TestMongo {
  uri: string;
  kind: TestMongoKind;
  /** Unique per call (`test_<random>`), so tests sharing a server do not see each other. */
  dbName: string;
  stop(): Promise<void>;
}

export interface TestMongoOptions {
  /** A standalone server (no change streams, no transactions). Offline server only. */
  standalone?: boolean;
  /** TTL monitor period in seconds. Offline server only. */
  ttlMonitorSleepSecs?: number;
}

/** A mongod binary that is already on this machine; never a download. */
function localMongodBinary(): string | undefined {
  if (process.env.MONGOMS_SYSTEM_BINARY) return process.env.MONGOMS_SYSTEM_BINARY;
  for (const directory of (process.env.PATH ?? '').split(delimiter)) {
    if (!directory) continue;
    const candidate = join(directory, 'mongod');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

function chooseKind(): TestMongoKind {
  if (process.env.MONGODB_URI) return 'uri';
  if (localMongodBinary()) return 'memory-server';
  return 'offline';
}

/** Whether a test may ask for this server feature: only the offline server emulates it. */
export function canEmulate(_feature: 'standalone' | 'ttlMonitorSleepSecs'): boolean {
  return chooseKind() === 'offline';
}

let announced = false;
function announce(kind: TestMongoKind, uri: string): void {
  if (announced) return;
  announced = true;
  const label = {
    uri: 'MONGODB_URI',
    'memory-server': 'mongodb-memory-server replica set',
    offline: 'offline test server (not MongoDB)',
  }[kind];
  process.stderr.write(`[mongo fixture] ${label} at ${uri.replace(/\/\/[^@/]*@/, '//***@')}\n`);
}

function uniqueDbName(): string {
  return `test_${randomBytes(6).toString('hex')}`;
}

interface SharedReplSet {
  uri: string;
  users: number;
  stop(): Promise<void>;
}
let sharedReplSet: Promise<SharedReplSet> | undefined;

async function startMemoryReplSet(): Promise<SharedReplSet> {
  const { MongoMemoryReplSet } = await import('mongodb-memory-server-core');
  const replSet = await MongoMemoryReplSet.create({
    replSet: { count: 1, storageEngine: 'wiredTiger' },
    binary: { systemBinary: localMongodBinary() },
  });
  return { uri: replSet.getUri(), users: 0, stop: async () => void (await replSet.stop()) };
}

/**
 * A MongoDB for one test file: `MONGODB_URI` if set, else a local `mongod` through
 * mongodb-memory-server, else the offline test server in this process.
 *
 * @example
 * const mongo = await startTestMongo();
 * const client = await MongoClient.connect(mongo.uri);
 * const db = client.db(mongo.dbName);
 */
export async function startTestMongo(options: TestMongoOptions = {}): Promise<TestMongo> {
  const kind = chooseKind();
  const dbName = uniqueDbName();
  if (kind === 'uri') {
    const uri = process.env.MONGODB_URI!;
    announce(kind, uri);
    return { uri, kind, dbName, stop: async () => undefined };
  }
  if (kind === 'memory-server') {
    sharedReplSet ??= startMemoryReplSet();
    const shared = await sharedReplSet;
    shared.users += 1;
    announce(kind, shared.uri);
    return {
      uri: shared.uri,
      kind,
      dbName,
      stop: async () => {
        shared.users -= 1;
        if (shared.users === 0) {
          sharedReplSet = undefined;
          await shared.stop();
        }
      },
    };
  }
  const server = await startOfflineMongo({
    replicaSet: !options.standalone,
    ttlMonitorSleepSecs: options.ttlMonitorSleepSecs,
  });
  announce(kind, server.uri);
  return { uri: server.uri, kind, dbName, stop: () => server.stop() };
}
