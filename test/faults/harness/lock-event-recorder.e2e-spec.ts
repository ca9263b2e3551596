import * as os from 'node:os';
import { MongoClient } from 'mongodb';
import { eventually, sleep } from '../../lock-service/lock-test-kit';
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
    await sleep(300);
    await locks.insertOne({ _id: 'k', fence: 1, owner: 'a' });
    await locks.updateOne({ _id: 'k' }, { $set: { fence: 2, owner: 'b', grantedTo: 'h2' } });
    await locks.updateOne({ _id: 'other' }, { $set: { fence: 2 } });
    await locks.updateOne({ _id: 'k' }, { $set: { waiting: {} }, $unset: { grantedTo: '' } });
    await eventually(() => recorder.around('k', '2').split('\n').length === 4);
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
    await sleep(300);
    await locks.insertOne({ _id: 'k', fence: 1 });
    await locks.updateOne({ _id: 'k' }, { $set: { waiting: 'x'.repeat(1000), fence: 2 } });
    await recorder.stop();

    const lines = recorder.around('k', '2').split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatch(/ update set waiting="x{159}… fence=2$/);
  });

  it('resumes after a stream error where it was: a change written meanwhile is kept', async () => {
    const locks = client
      .db(mongo.dbName)
      .collection<{ _id: string; [field: string]: unknown }>('resumed');
    // The fail point is aimed at the recorder's own client by appName (the `os` adapter lets
    // Jest's VM send it), so no other connection to a shared server can take the failure.
    const recorderClient = await MongoClient.connect(mongo.uri, {
      appName: 'recorder',
      runtimeAdapters: { os },
    });
    const recorder = new LockEventRecorder(recorderClient.db(mongo.dbName).collection('resumed'));
    try {
      await sleep(300);
      await locks.insertOne({ _id: 'k', fence: 1 });
      await eventually(() => recorder.around('k', '1').includes('insert'));
      await client.db('admin').command({
        configureFailPoint: 'failCommand',
        mode: { times: 1 },
        data: { failCommands: ['getMore'], errorCode: 2, errorLabels: [], appName: 'recorder' },
      });
      await eventually(() => recorder.around('k', '1').includes('1 stream error(s)'));
      // A non-resumable error (no label): the driver gives it to the recorder, which reopens
      // its stream 100 ms later. This is written before that.
      await locks.updateOne({ _id: 'k' }, { $set: { fence: 2 } });
      await eventually(() => recorder.around('k', '2').includes('around the write of fence 2'));
      expect(recorder.around('k', '2').split('\n')[0]).toBe(
        '  changes of k around the write of fence 2, 1 stream error(s), resumed:',
      );
    } finally {
      await recorder.stop();
      await recorderClient.close();
    }
  }, 20_000);
});
