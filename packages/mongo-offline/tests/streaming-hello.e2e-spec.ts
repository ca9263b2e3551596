import { ObjectId } from 'bson';
import type {
  Document,
  ServerDescriptionChangedEvent,
  ServerHeartbeatSucceededEvent,
} from 'mongodb';
import { useOfflineMongo } from './with-offline-mongo';

// As a MongoDB 4.4+ does: hello carries a topologyVersion, waits for a change of it when asked
// (awaitable hello), and streams to a driver's monitor (exhaust), so that a step-down reaches
// the driver at once rather than at its next poll; NotPrimary errors carry it too.

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

  it('answers at once for another process, and refuses half an awaitable hello', async () => {
    const { topologyVersion } = await admin().command({ hello: 1 });
    const other = { processId: new ObjectId(), counter: topologyVersion.counter };
    const startedAt = Date.now();
    await admin().command({ hello: 1, topologyVersion: other, maxAwaitTimeMS: 5_000 });
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    await expect(admin().command({ hello: 1, maxAwaitTimeMS: 100 })).rejects.toMatchObject({
      code: 9,
    });
  });

  it('streams to the driver: its monitor heartbeats are awaited ones', async () => {
    const client = harness().client;
    const awaited = await new Promise<boolean>((resolve) => {
      const listener = (event: ServerHeartbeatSucceededEvent) => {
        client.off('serverHeartbeatSucceeded', listener);
        resolve(event.awaited);
      };
      client.on('serverHeartbeatSucceeded', listener);
      // A heartbeat answers within maxAwaitTimeMS (heartbeatFrequencyMS, 500 ms here).
    });
    expect(awaited).toBe(true);
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
    // The monitor's first awaited hello is on its way.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await admin.command({ replSetStepDown: 1 });
    for (let i = 0; i < 20 && !roles.includes('RSSecondary'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(roles).toContain('RSSecondary');
    for (let i = 0; i < 40 && roles.at(-1) !== 'RSPrimary'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
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
