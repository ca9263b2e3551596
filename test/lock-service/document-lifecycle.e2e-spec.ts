// Document locks at the edges of a service's life, as key locks: an acquisition waiting for the
// start is bounded by its own time and ended by close(); after close() begins, document calls
// fail with LockServiceClosedError. MongoDB runs in its own process so that it can be frozen.
import { MongoClient } from 'mongodb';
import { LockService } from '../../lib/lock.service';
import { LockServiceClosedError } from '../../lib/errors/lock-service-closed.error';
import { LockStoreUnavailableError } from '../../lib/errors/lock-store-unavailable.error';
import {
  describeWithFailPoints,
  faultTools,
  settleWithin,
  signalledMongo,
} from './adversarial/kit';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

/** Far below the operationTimeoutMs a broken wait would take, far above a loaded machine's lag. */
const BOUND_MS = 4_000;
const operationTimeoutMs = 8_000;
const describeWithProcess = process.env.MONGODB_URI ? describe.skip : describe;

describeWithProcess('a document acquisition while the start waits on a frozen MongoDB', () => {
  const mongo = signalledMongo();

  it('counts the start in its time (tryAcquire: 1 s), as a key acquisition does', async () => {
    mongo.server.signal('SIGSTOP');
    const locks = new LockService({
      uri: mongo.server.uri,
      dbName: 'starting',
      operationTimeoutMs,
    });
    mongo.services.push(locks);
    const [key, document] = await Promise.all([
      settleWithin(locks.tryAcquire('k'), 20_000),
      settleWithin(locks.documents('docs').tryAcquire('d'), 20_000),
    ]);
    expect(key.error).toBeInstanceOf(LockStoreUnavailableError);
    expect(document.error).toBeInstanceOf(LockStoreUnavailableError);
    expect(document.ms).toBeLessThan(BOUND_MS);
  });

  it('is bounded by its time on a started service whose MongoDB froze', async () => {
    const locks = new LockService({ uri: mongo.server.uri, dbName: 'stream', operationTimeoutMs });
    mongo.services.push(locks);
    await locks.start();
    mongo.server.signal('SIGSTOP');
    const document = await settleWithin(
      locks.documents('fresh').acquire('d', { timeoutMs: 500 }),
      20_000,
    );
    expect(document.error).toBeInstanceOf(LockStoreUnavailableError);
    expect(document.ms).toBeLessThan(BOUND_MS);
  });

  it('fails with LockServiceClosedError as close() ends the start (the application client)', async () => {
    const client = new MongoClient(mongo.server.uri);
    mongo.clients.push(client);
    await client.connect();
    mongo.server.signal('SIGSTOP');
    const locks = new LockService({
      client,
      dbName: 'closing',
      operationTimeoutMs,
      shutdownGraceMs: 200,
    });
    mongo.services.push(locks);
    const key = settleWithin(locks.acquire('k', { timeoutMs: 20_000 }), 30_000);
    const document = settleWithin(
      locks.documents('docs').acquire('d', { timeoutMs: 20_000 }),
      30_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const closedAt = performance.now();
    expect((await settleWithin(locks.close(), 20_000)).status).toBe('resolved');
    const [keyOutcome, documentOutcome] = await Promise.all([key, document]);
    expect(keyOutcome.error).toBeInstanceOf(LockServiceClosedError);
    expect(documentOutcome.error).toBeInstanceOf(LockServiceClosedError);
    expect(performance.now() - closedAt).toBeLessThan(BOUND_MS);
  });
});

describe('document calls after close()', () => {
  const kit = LockTestKit.forSuite();

  it.each(['its own', 'the application'] as const)(
    'inspect and updateIfCurrent fail with LockServiceClosedError and write nothing (%s client)',
    async (whose) => {
      const client = await kit.client();
      const name = `after_close_${whose === 'its own' ? 'own' : 'app'}`;
      const collection = client
        .db(kit.mongo.dbName)
        .collection<{ _id: string; n: number; version: number }>(name);
      await collection.insertOne({ _id: 'd', n: 0, version: 0 });
      const locks = await kit.service({
        shutdownGraceMs: 100,
        ...(whose === 'the application' ? { client } : {}),
      });
      const documents = locks.documents(name, { version: { field: 'version' } });
      await documents.inspect('d');
      await locks.close();
      await expect(documents.inspect('d')).rejects.toBeInstanceOf(LockServiceClosedError);
      await expect(documents.updateIfCurrent('d', 0, { $set: { n: 1 } })).rejects.toBeInstanceOf(
        LockServiceClosedError,
      );
      expect(await collection.findOne({ _id: 'd' })).toMatchObject({ n: 0, version: 0 });
    },
  );
});

describeWithFailPoints("a collection's first lock while its change stream is slow to open", () => {
  const kit = LockTestKit.forSuite();
  const { delayNext, appClient } = faultTools(kit);

  it('is taken without waiting for the stream (tryAcquire), or for the wait at most', async () => {
    const appName = 'slow-stream';
    const client = await appClient(appName);
    const documents = client.db(kit.mongo.dbName).collection<{ _id: string }>('slow_stream');
    await documents.insertMany([{ _id: 'now' }, { _id: 'waited' }]);
    const locks = await kit.service({ client });
    // The change stream's aggregate reaches MongoDB 5 s late; every other command at once.
    await delayNext(appName, 'aggregate', 5_000);
    const startedAt = performance.now();
    const now = await locks.documents('slow_stream').tryAcquire('now');
    expect(now).not.toBeNull();
    expect(performance.now() - startedAt).toBeLessThan(BOUND_MS - 1_000);
    const waited = await locks.documents('slow_stream').acquire('waited', { timeoutMs: 1_000 });
    await Promise.all([now!.release(), waited.release()]);
  });
});
