// Starts the server under test through the project's fixture and connects the internal client.
import { MongoClient } from 'mongodb';
import { startTestMongo } from '../support/mongo';
import type { RunContext } from './run-context';
import { probeServer } from './server-info';

export interface SpecServer {
  ctx: RunContext;
  stop(): Promise<void>;
}

export async function startSpecServer(): Promise<SpecServer> {
  const mongo = await startTestMongo();
  const internalClient = new MongoClient(mongo.uri);
  try {
    await internalClient.connect();
    const server = await probeServer(internalClient, mongo.uri, mongo.kind);
    // The spec: end transactions left open by earlier runs before any test.
    await internalClient
      .db('admin')
      .command({ killAllSessions: [] })
      .catch(() => undefined);
    return {
      ctx: { uri: mongo.uri, internalClient, server },
      stop: async () => {
        await internalClient.close();
        await mongo.stop();
      },
    };
  } catch (error) {
    await internalClient.close().catch(() => undefined);
    await mongo.stop();
    throw error;
  }
}
