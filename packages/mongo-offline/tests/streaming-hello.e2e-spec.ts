import { ObjectId } from 'bson';
import { type Document, Long, MongoClient, type ServerDescriptionChangedEvent } from 'mongodb';
import { OfflineMongoServer } from '../server';
import { useOfflineMongo } from './with-offline-mongo';

// As a MongoDB 4.4+ does: hello carries a topologyVersion, waits for a change of it when asked
// (awaitable hello), and streams to a driver's monitor (exhaust), so that a step-down reaches
// the driver at once rather than at its next poll; NotPrimary errors carry it too.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('offline mongo: awaitable hello', () => {
  const harness = useOfflineMongo({}, { heartbeatFrequencyMS: 500 });
  const admin = () => harness().client.db('admin');

  it('reports a topologyVersion, and waits up to maxAwaitTimeMS while it is unchanged', async () => {
    const { topologyVersion } = await admin().command({ hello: 1 });
    expect(topologyVersion.processId).toBeInstanceOf(ObjectId);
    const startedAt = Date.now();
    const awaited = await admin().command({ hello: 1, topologyVersion, maxAwaitTimeMS: 300 });
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(250);
    expect(awaited.topologyVersion).toEqual(topologyVersion);
  });

  it("answers at once for another process, and refuses bad requests with mongod's codes", async () => {
    const { topologyVersion } = await admin().command({ hello: 1 });
    const other = { processId: new ObjectId(), counter: topologyVersion.counter };
    const startedAt = Date.now();
    await admin().command({ hello: 1, topologyVersion: other, maxAwaitTimeMS: 5_000 });
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    const refused = (command: Document) => admin().command({ hello: 1, ...command });
    await expect(refused({ maxAwaitTimeMS: 100 })).rejects.toMatchObject({ code: 31368 });
    await expect(refused({ topologyVersion })).rejects.toMatchObject({ code: 31368 });
    await expect(refused({ topologyVersion, maxAwaitTimeMS: -1 })).rejects.toMatchObject({
      code: 31373,
    });
    const negative = { processId: topologyVersion.processId, counter: Long.fromNumber(-1) };
    await expect(refused({ topologyVersion: negative, maxAwaitTimeMS: 0 })).rejects.toMatchObject({
      code: 31372,
    });
  });

  it('is primary again in the hello that announces the step-up', async () => {
    // The step-up's timer may fire a little before Date.now() reaches the end of the step-down.
    let awaited = 0;
    for (let round = 0; round < 25; round += 1) {
      await admin().command({ replSetStepDown: 0.02 });
      const { topologyVersion, isWritablePrimary } = await admin().command({ hello: 1 });
      // Stepped up already (a slow machine took 20 ms to ask): no hello is left to await.
      if (isWritablePrimary) continue;
      awaited += 1;
      const up = await admin().command({ hello: 1, topologyVersion, maxAwaitTimeMS: 2_000 });
      expect(Number(up.topologyVersion.counter)).toBe(Number(topologyVersion.counter) + 1);
      expect(up.isWritablePrimary).toBe(true);
    }
    expect(awaited).toBeGreaterThan(0);
  });
});

describe('offline mongo: a step-down reaches a streaming driver at once', () => {
  // A poll every 60 s: only the stream can tell the driver in time.
  const harness = useOfflineMongo({}, { heartbeatFrequencyMS: 60_000 });

  it('pushes the step-down and the step-up, each a new topologyVersion', async () => {
    const { client } = harness();
    const admin = client.db('admin');
    const before = (await admin.command({ hello: 1 })).topologyVersion as Document;
    const roles: string[] = [];
    client.on('serverDescriptionChanged', (event: ServerDescriptionChangedEvent) =>
      roles.push(event.newDescription.type),
    );
    // The monitor's streaming hello starts about heartbeatFrequencyMS's minimum (500 ms) after
    // its handshake: wait for it, so that the step-down is pushed, not read by a first hello.
    await sleep(1_000);
    await admin.command({ replSetStepDown: 1 });
    for (let i = 0; i < 20 && !roles.includes('RSSecondary'); i++) await sleep(50);
    expect(roles).toContain('RSSecondary');
    for (let i = 0; i < 40 && roles.at(-1) !== 'RSPrimary'; i++) await sleep(50);
    expect(roles.at(-1)).toBe('RSPrimary');
    // Down and up: two changes of role.
    const after = (await admin.command({ hello: 1 })).topologyVersion as Document;
    expect(Number(after.counter)).toBe(Number(before.counter) + 2);
  });

  it('gives a NotPrimary error the topologyVersion, so a driver can tell a stale one', async () => {
    const { client } = harness();
    const admin = client.db('admin');
    const { topologyVersion } = await admin.command({ hello: 1 });
    await admin.command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['find'], errorCode: 10107 },
    });
    // A command the driver does not retry.
    const error = await client
      .db('stream')
      .command({ find: 'items' })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 10107, topologyVersion });
  });
});

describe('offline mongo: awaitable hellos', () => {
  it('stop waiting when the client goes, and when the server stops', async () => {
    const server = new OfflineMongoServer({
      host: '127.0.0.1',
      port: 0,
      replicaSet: true,
      ttlMonitorSleepSecs: 60,
    });
    const port = await server.listen();
    const waiting = () => server.state.listenerCount('topologyChanged');
    const uri = `mongodb://127.0.0.1:${port}/?replicaSet=rs0`;
    const clients = await Promise.all(
      [1, 2, 3].map(() => MongoClient.connect(uri, { heartbeatFrequencyMS: 10_000 })),
    );
    for (let i = 0; i < 40 && waiting() < 3; i++) await sleep(50);
    expect(waiting()).toBeGreaterThanOrEqual(3);
    await Promise.all(clients.map((client) => client.close()));
    for (let i = 0; i < 20 && waiting() > 0; i++) await sleep(50);
    expect(waiting()).toBe(0);

    const last = await MongoClient.connect(uri, { heartbeatFrequencyMS: 10_000 });
    const { topologyVersion } = await last.db('admin').command({ hello: 1 });
    const awaited = last.db('admin').command({ hello: 1, topologyVersion, maxAwaitTimeMS: 9_000 });
    const outcome = awaited.catch((error: unknown) => error);
    await sleep(100);
    const stoppedAt = Date.now();
    await server.stop();
    // Answered (ShutdownInProgress) as the server stops, or cut off with its connection: not
    // left waiting out its 9 s, and no wait is left behind.
    expect(await outcome).toBeInstanceOf(Error);
    expect(Date.now() - stoppedAt).toBeLessThan(2_000);
    expect(waiting()).toBe(0);
    await last.close(true);
  });
});
