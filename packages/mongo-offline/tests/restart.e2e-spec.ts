import { MongoClient, ObjectId, type ServerDescriptionChangedEvent } from 'mongodb';
import { startOfflineMongo, type OfflineMongo } from '../index';

/** Waits for the client to see `address` as a primary with `electionId`. */
function primaryWith(client: MongoClient, electionId: ObjectId): Promise<void> {
  return new Promise((resolve) => {
    const listener = (event: ServerDescriptionChangedEvent): void => {
      const seen = event.newDescription;
      if (seen.type !== 'RSPrimary' || !seen.electionId?.equals(electionId)) return;
      client.off('serverDescriptionChanged', listener);
      resolve();
    };
    client.on('serverDescriptionChanged', listener);
  });
}

const helloOf = (client: MongoClient) => client.db('admin').command({ hello: 1 });

// A restarted mongod keeps its data and wins a new election: its term, and the electionId
// made from it, grow. Per SDAM, a client that has seen a higher (electionId, setVersion) takes
// a primary that reports a lower one for stale and never selects it. This server keeps no data
// across restarts (README), but it must still look like a newer primary to clients that knew
// the one before it.
describe('offline mongo: a restart on the same port', () => {
  let first: OfflineMongo | undefined;
  let second: OfflineMongo | undefined;
  let client: MongoClient | undefined;

  afterAll(async () => {
    await client?.close();
    await first?.stop();
    await second?.stop();
  });

  it('comes back with a higher term and electionId, and clients that knew the old one use it', async () => {
    first = await startOfflineMongo();
    client = await MongoClient.connect(first.uri, {
      serverSelectionTimeoutMS: 5000,
      heartbeatFrequencyMS: 500,
    });
    const before = await helloOf(client);
    expect(before.electionId).toBeInstanceOf(ObjectId);
    expect(before.electionId.toHexString()).toMatch(/^7fffffff/);
    // The term in every opTime is the one the electionId was made from.
    expect(BigInt(`0x${before.electionId.toHexString().slice(8)}`)).toBe(
      BigInt(before.lastWrite.opTime.t.toString()),
    );
    await client.db('restart').collection<{ _id: number }>('items').insertOne({ _id: 1 });

    const { port } = first;
    await first.stop();
    first = undefined;
    // Another process would take longer than this to start; the term is the start time in ms.
    await new Promise((resolve) => setTimeout(resolve, 5));
    second = await startOfflineMongo({ port });

    const after = await helloOf(client);
    expect(after.electionId.toHexString() > before.electionId.toHexString()).toBe(true);
    expect(BigInt(after.lastWrite.opTime.t.toString())).toBeGreaterThan(
      BigInt(before.lastWrite.opTime.t.toString()),
    );
    expect(after.setVersion).toBe(before.setVersion);
    // The client takes the new primary: a stale one would stay Unknown, and a write, which
    // needs a primary the client accepts, would fail server selection.
    await primaryWith(client, after.electionId);
    await client.db('restart').collection<{ _id: number }>('items').insertOne({ _id: 2 });
    // Nothing survives a restart of this server.
    expect(
      await client.db('restart').collection<{ _id: number }>('items').countDocuments({ _id: 1 }),
    ).toBe(0);
  }, 30_000);
});
