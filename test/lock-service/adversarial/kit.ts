// Shared helpers of the adversarial review's tests.
import * as os from 'node:os';
import { MongoClient } from 'mongodb';
import type {
  CommandFailedEvent,
  CommandStartedEvent,
  Document,
  MongoClientOptions,
} from 'mongodb';
import type { LockService } from '../../../lib/lock.service';
import { canEmulate } from '../../support/mongo';
import { type OfflineMongoProcess, spawnOfflineMongo } from '../../support/offline-mongo-process';
import type { LockTestKit } from '../lock-test-kit';

export type FailPointMode = 'alwaysOn' | 'off' | { times: number } | { skip: number };

export interface Settled<T> {
  status: 'resolved' | 'rejected' | 'pending';
  value?: T;
  error?: unknown;
  ms: number;
}

export async function settleWithin<T>(promise: Promise<T>, limitMs: number): Promise<Settled<T>> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    promise.then(
      (value) => ({ status: 'resolved' as const, value }),
      (error: unknown) => ({ status: 'rejected' as const, error }),
    ),
    new Promise<{ status: 'pending' }>((resolve) => {
      timer = setTimeout(() => resolve({ status: 'pending' }), limitMs);
    }),
  ]);
  clearTimeout(timer);
  return { ...outcome, ms: performance.now() - started };
}

export const describeWithFailPoints = canEmulate('standalone') ? describe : describe.skip;

/** Fail points and app-named clients for one suite. */
export function faultTools(kit: LockTestKit) {
  let admin: MongoClient | undefined;
  const clients: MongoClient[] = [];

  beforeAll(async () => {
    admin = await MongoClient.connect(kit.mongo.uri);
  });
  afterEach(async () => {
    await failPoint('off');
    await kit.cleanup();
    await Promise.all(clients.splice(0).map((client) => client.close().catch(() => undefined)));
  });
  afterAll(async () => {
    await admin?.close();
  });

  /**
   * Configures `failCommand` and returns how many times it has fired so far (the server's
   * `count`, never reset): compared with a later call's, it shows whether the fault fired.
   */
  async function failPoint(mode: FailPointMode, data: Document = {}): Promise<number> {
    const reply = await admin!
      .db('admin')
      .command({ configureFailPoint: 'failCommand', mode, data });
    return Number(reply.count);
  }

  /**
   * Resolves once `failCommand` has fired `times` times since the server started (compare with
   * `failPoint`'s count); rejects if it has not within `ms`.
   */
  async function failPointFired(times: number, ms = 10_000): Promise<void> {
    await admin!
      .db('admin')
      .command({ waitForFailPoint: 'failCommand', timesEntered: times, maxTimeMS: ms });
  }

  /** The next `command` of the client named `appName` reaches MongoDB `ms` late (it then runs). */
  function delayNext(appName: string, command: string, ms: number): Promise<number> {
    return failPoint(
      { times: 1 },
      { failCommands: [command], appName, blockConnection: true, blockTimeMS: ms },
    );
  }

  async function appClient(appName: string, options: MongoClientOptions = {}) {
    const client = new MongoClient(kit.mongo.uri, { appName, runtimeAdapters: { os }, ...options });
    clients.push(client);
    await client.connect();
    return client;
  }

  async function rawLock(key: string): Promise<Record<string, unknown> | undefined> {
    return (await kit.rawLocks()).find((doc) => doc._id === key);
  }

  /** Closes `client` after the test. */
  function closeAfterTest(client: MongoClient): void {
    clients.push(client);
  }

  return { failPoint, failPointFired, delayNext, appClient, rawLock, closeAfterTest };
}

/** Applied on the primary, reply says the majority did not confirm it in time (not retried). */
export const writeConcernTimeout = (appName: string) => ({
  failCommands: ['findAndModify'],
  appName,
  writeConcernError: {
    code: 64,
    codeName: 'WriteConcernFailed',
    errmsg: 'waiting for replication timed out',
    errInfo: { wtimeout: true },
  },
});

export async function canTake(locks: LockService, key: string): Promise<boolean> {
  const handle = await locks.tryAcquire(key);
  await handle?.release();
  return handle !== null;
}

/**
 * A MongoDB in its own process for each test, to freeze (`SIGSTOP`) or kill; the services and
 * clients pushed to its lists are closed after the test, then the server is stopped.
 */
export function signalledMongo() {
  const mongo = {
    server: undefined as unknown as OfflineMongoProcess,
    services: [] as LockService[],
    clients: [] as MongoClient[],
  };
  beforeEach(async () => {
    mongo.server = await spawnOfflineMongo();
  });
  afterEach(async () => {
    mongo.server.signal('SIGCONT');
    await Promise.all(mongo.services.splice(0).map((s) => settleWithin(s.close(), 5_000)));
    await Promise.all(mongo.clients.splice(0).map((c) => c.close(true).catch(() => undefined)));
    await mongo.server.stop();
  });
  return mongo;
}

/** The keys (`_id`s) of `client`'s findAndModify commands that failed, in the order they did. */
export function failedKeysOf(client: MongoClient): unknown[] {
  const keyOf = new Map<number, unknown>();
  const failedKeys: unknown[] = [];
  client.on('commandStarted', (event: CommandStartedEvent) => {
    if (event.commandName === 'findAndModify') {
      keyOf.set(event.requestId, (event.command.query as Document | undefined)?._id);
    }
  });
  client.on('commandFailed', (event: CommandFailedEvent) => {
    if (keyOf.has(event.requestId)) failedKeys.push(keyOf.get(event.requestId));
  });
  return failedKeys;
}
