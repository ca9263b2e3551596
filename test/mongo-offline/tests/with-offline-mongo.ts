import { MongoClient, type MongoClientOptions } from 'mongodb';
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
