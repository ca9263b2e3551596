import { MongoClient } from 'mongodb';
import { startTestMongo, type TestMongo } from '../../support/mongo';
import { LockEventRecorder } from './lock-event-recorder';

describe('LockEventRecorder', () => {
  let mongo: TestMongo;
  let client: MongoClient;

  beforeAll(async () => {
    mongo = await startTestMongo();
    client = await MongoClient.connect(mongo.uri);
  });

  afterAll(async () => {
    await client.close();
    await mongo.stop();
  });

  it("shows a key's changes around the write of a fence, and only that key's", async () => {
    const db = client.db(mongo.dbName);
    const locks = db.collection<{ _id: string; [field: string]: unknown }>('locks');
    await locks.insertOne({ _id: 'other' });
    const recorder = new LockEventRecorder(db.collection('locks'));
    // Let the stream open before the first write.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await locks.insertOne({ _id: 'k', fence: 1, owner: 'a' });
    await locks.updateOne({ _id: 'k' }, { $set: { fence: 2, owner: 'b', grantedTo: 'h2' } });
    await locks.updateOne({ _id: 'other' }, { $set: { fence: 2 } });
    await locks.updateOne({ _id: 'k' }, { $set: { waiting: {} }, $unset: { grantedTo: '' } });
    await waitFor(() => recorder.around('k', '2').split('\n').length === 4);
    await recorder.stop();

    const [heading, ...lines] = recorder.around('k', '2').split('\n');
    expect(heading).toBe('  changes of k around the write of fence 2:');
    const time = String.raw` {4}@\d+\.\d \([-+]\d+\.\d ms\)`;
    expect(lines[0]).toMatch(new RegExp(`^${time} insert set _id="k" fence=1 owner="a"$`));
    expect(lines[1]).toMatch(
      /^ {4}@\d+\.\d \(\+0\.0 ms\) update set fence=2 owner="b" grantedTo="h2"$/,
    );
    expect(lines[2]).toMatch(new RegExp(`^${time} update unset grantedTo set waiting=\\{\\}$`));
    expect(recorder.around('k', '9').split('\n')[0]).toBe(
      '  changes of k (no recorded change wrote fence 9):',
    );
  });

  it('records what was written before stop(), and cuts long values but keeps every field', async () => {
    const db = client.db(mongo.dbName);
    const locks = db.collection<{ _id: string; [field: string]: unknown }>('drained');
    const recorder = new LockEventRecorder(db.collection('drained'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await locks.insertOne({ _id: 'k', fence: 1 });
    await locks.updateOne({ _id: 'k' }, { $set: { waiting: 'x'.repeat(1000), fence: 2 } });
    await recorder.stop();

    const lines = recorder.around('k', '2').split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatch(/ update set waiting="x{159}… fence=2$/);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !condition(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(condition()).toBe(true);
}
