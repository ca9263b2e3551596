import { type CommandStartedEvent, MongoClient, type MongoClientOptions } from 'mongodb';
import { type OfflineMongo, type OfflineMongoOptions, startOfflineMongo } from '../index';

export interface OfflineHarness {
  mongo: OfflineMongo;
  client: MongoClient;
}

/** Starts a server and a connected driver client for one test file. */
export function useOfflineMongo(
  options: OfflineMongoOptions = {},
  clientOptions: MongoClientOptions = {},
): () => OfflineHarness {
  let harness: OfflineHarness | undefined;
  beforeAll(async () => {
    const mongo = await startOfflineMongo(options);
    const client = await MongoClient.connect(mongo.uri, {
      serverSelectionTimeoutMS: 5000,
      // The driver's monitor streams hello: after a shutdown error that failCommand injects
      // (no real change of role), it looks at the server again only at its next heartbeat.
      // 500 ms, as the drivers' own specification tests use.
      heartbeatFrequencyMS: 500,
      monitorCommands: true,
      ...clientOptions,
    });
    harness = { mongo, client };
  });
  afterAll(async () => {
    await harness?.client.close();
    await harness?.mongo.stop();
  });
  return () => {
    if (!harness) throw new Error('server not started');
    return harness;
  };
}

/** Resolves when the client next sends `commandName` (e.g. a change stream's first getMore). */
export function commandStarted(client: MongoClient, commandName: string): Promise<void> {
  return new Promise((resolve) => {
    const listener = (event: CommandStartedEvent): void => {
      if (event.commandName !== commandName) return;
      client.off('commandStarted', listener);
      resolve();
    };
    client.on('commandStarted', listener);
  });
}

/**
 * Starts waiting for the stream's next event and resolves once its cursor is open on the
 * server (the first getMore was sent), so writes made afterwards are seen by it.
 */
export async function openStream<T>(
  client: MongoClient,
  stream: { next(): Promise<T> },
): Promise<{ next: Promise<T> }> {
  const ready = commandStarted(client, 'getMore');
  const next = stream.next();
  await ready;
  return { next };
}
