// The client the service creates from `uri` (lib/store/own-client.ts): its server selection
// ends before `operationTimeoutMs`, so a start or a command MongoDB cannot be reached for fails
// with the driver's reason, and a URI's own serverSelectionTimeoutMS is kept.
import { MongoClient, MongoServerSelectionError } from 'mongodb';
import { LockStoreUnavailableError } from '../../lib/errors';
import { LockService } from '../../lib/lock.service';
import { resolveModuleOptions } from '../../lib/options';
import { LockStore } from '../../lib/store/lock-store';
import { spawnOfflineMongo } from '../support/offline-mongo-process';
import { settleWithin } from './adversarial/kit';
import { LockTestKit } from './lock-test-kit';
import { closedPort } from '../support/closed-port';

jest.setTimeout(60_000);

/** `uri` with the option `name` set to `value`. */
function withOption(uri: string, name: string, value: string): string {
  const [base, query] = uri.split('?');
  const options = new URLSearchParams(query);
  options.set(name, value);
  return `${base}${/\/\/[^/]*$/.test(base) ? '/' : ''}?${options.toString()}`;
}

/** The driver's reason for a failed call: its server selection error, with the refusal. */
function expectRefusalCause(error: unknown): void {
  expect(error).toBeInstanceOf(LockStoreUnavailableError);
  expect((error as Error).message).toMatch(/ECONNREFUSED/);
  expect((error as Error).cause).toBeInstanceOf(MongoServerSelectionError);
}

describe('the client created from uri', () => {
  const kit = LockTestKit.forSuite();
  const stores: LockStore[] = [];
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
  });

  async function openStore(uri: string, operationTimeoutMs = 5_000): Promise<LockStore> {
    const options = resolveModuleOptions(kit.options({ uri, operationTimeoutMs }));
    const store = await LockStore.open(options, new AbortController().signal);
    stores.push(store);
    return store;
  }

  it('a start with nothing listening fails with the driver reason, in message and cause', async () => {
    const port = await closedPort();
    const locks = new LockService({
      uri: `mongodb://127.0.0.1:${port}/?directConnection=true`,
      operationTimeoutMs: 1_000,
    });
    try {
      const started = await settleWithin(locks.start(), 10_000);
      expect(started.status).toBe('rejected');
      expectRefusalCause(started.error);
      expect((started.error as Error).message).toMatch(/^LockService could not start: /);
    } finally {
      await locks.close().catch(() => undefined);
    }
  });

  it('looks for a server for less than operationTimeoutMs, unless the URI says how long', async () => {
    const own = await openStore(kit.mongo.uri, 5_000);
    expect(own.client.options.serverSelectionTimeoutMS).toBeLessThan(5_000);
    expect(own.client.options.serverSelectionTimeoutMS).toBeGreaterThan(0);
    // Option names are read in any case, as the driver does.
    for (const name of ['serverSelectionTimeoutMS', 'serverselectiontimeoutms']) {
      const named = await openStore(withOption(kit.mongo.uri, name, '12345'), 5_000);
      expect(named.client.options.serverSelectionTimeoutMS).toBe(12_345);
    }
  });

  it("leaves a user's client as it is", async () => {
    const client = new MongoClient(kit.mongo.uri);
    try {
      const options = resolveModuleOptions(kit.options({ client, operationTimeoutMs: 1_000 }));
      const store = await LockStore.open(options, new AbortController().signal);
      expect(store.client).toBe(client);
      expect(client.options.serverSelectionTimeoutMS).toBe(30_000);
    } finally {
      await client.close();
    }
  });
});

const describeWithProcess = process.env.MONGODB_URI ? describe.skip : describe;

describeWithProcess('a command while MongoDB is down', () => {
  it('fails with the driver reason, not only our bound', async () => {
    const server = await spawnOfflineMongo();
    // Server selection (4 s) outlasts the reply margin (1 s): a wait's last command is cut by our
    // bound, after earlier ones failed with the driver's reason.
    const locks = new LockService({ uri: server.uri, dbName: 'own', operationTimeoutMs: 5_000 });
    try {
      await locks.start();
      await locks.inspect('down:k');
      await server.kill();
      const inspected = await settleWithin(locks.inspect('down:k'), 10_000);
      expect(inspected.status).toBe('rejected');
      expectRefusalCause(inspected.error);
      // A wait cut by our bound names the failure its earlier retries saw.
      const waited = await settleWithin(locks.acquire('down:k', { timeoutMs: 6_000 }), 10_000);
      expect(waited.status).toBe('rejected');
      const error = waited.error as Error;
      expect(error.message).toMatch(/did not answer the acquisition of "down:k".*ECONNREFUSED/);
      // The cause is the store's error for the last try, which carries the driver's.
      expectRefusalCause(error.cause);
    } finally {
      await settleWithin(locks.close(), 10_000);
      await server.stop().catch(() => undefined);
    }
  });
});
