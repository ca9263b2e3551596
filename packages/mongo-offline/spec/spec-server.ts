// Starts the server under test through the project's fixture and connects the internal client.
import { MongoClient } from 'mongodb';
import { canEmulate, startTestMongo } from '../test-mongo';
import type { RunContext } from './run-context';
import { probeServer } from './server-info';

export interface SpecServer {
  ctx: RunContext;
  stop(): Promise<void>;
}

/** `standalone`: the offline server as a single server (the other kinds are what they are). */
export async function startSpecServer(options: { standalone?: boolean } = {}): Promise<SpecServer> {
  if (options.standalone && !canEmulate('standalone')) {
    throw new Error('--standalone needs the offline server (unset MONGODB_URI)');
  }
  const mongo = await startTestMongo({ standalone: options.standalone });
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
