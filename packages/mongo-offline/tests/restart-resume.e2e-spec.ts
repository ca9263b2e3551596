import { type ChangeStreamDocument, MongoClient, type ResumeToken } from 'mongodb';
import { startOfflineMongo, type OfflineMongo } from '../index';

// Promised (README, "A restart loses everything"): a restarted server comes back without its
// oplog, "a resume token from before the restart is not found". MongoDB refuses to resume a
// change stream from a point older than the oldest entry of its oplog (ChangeStreamHistoryLost,
// 286, labelled NonResumableChangeStreamError): a mongod restarted on an empty data directory
// (or a new replica set on the old address) has no history from before, so a client resuming
// with an old token learns that events may have been missed.
// What happens instead: the restarted offline server takes the old token, starts at the first
// entry after its time (every entry of the new history) and streams on as if nothing had been
// lost. `assertHistoryKept` (change-streams/open-change-stream.ts) only refuses a point older
// than an entry dropped by the oplog's capacity (`firstPosition > 0`), never one older than the
// server's own start. So a client (the library's change streams, resumed by the driver after
// the restart's network error) never sees the loss that MongoDB would report.
describe('offline mongo: resuming a change stream across a restart', () => {
  let server: OfflineMongo | undefined;
  let client: MongoClient | undefined;

  afterEach(async () => {
    await client?.close();
    await server?.stop();
  });

  it('refuses a resume token from before the restart with ChangeStreamHistoryLost', async () => {
    server = await startOfflineMongo();
    client = await MongoClient.connect(server.uri);
    const items = () => client!.db('resume').collection<{ _id: number }>('items');
    const stream = items().watch<{ _id: number }, ChangeStreamDocument<{ _id: number }>>();
    const first = stream.next();
    // The stream is open once its first (empty) reply set a resume token.
    await new Promise((resolve) => stream.once('resumeTokenChanged', resolve));
    await items().insertOne({ _id: 1 });
    const token: ResumeToken = (await first)._id;
    await stream.close();

    const { port } = server;
    await server.stop();
    // A mongod restarted on an empty data directory, later: its history starts after the token.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    server = await startOfflineMongo({ port });
    await client.close();
    client = await MongoClient.connect(server.uri);
    await items().insertOne({ _id: 2 });

    const resumed = items().watch([], { resumeAfter: token });
    const outcome = await resumed.tryNext().then(
      (change) => ({ change: change?.operationType }),
      (error: { code?: number }) => ({ code: error.code }),
    );
    await resumed.close();
    expect(outcome).toEqual({ code: 286 });
  });
});
