// `created` says whether this call's join made the document: a document the application
// inserts while the lock's upsert is on its way is not one (and createIfMissing stays out of it).
import type { Document } from 'mongodb';
import { LockTestKit, sleep } from '../lock-service/lock-test-kit';
import { describeWithFailPoints, faultTools } from '../lock-service/adversarial/kit';

jest.setTimeout(30_000);

describeWithFailPoints('document locks: created', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('a document inserted by the application just before the upsert is not reported created', async () => {
    const client = await appClient('created-race');
    const docs = (await kit.service({ client })).documents<Document>('created_race');
    const accounts = client
      .db(kit.mongo.dbName)
      .collection<{ _id: string; balance: number }>('created_race');
    // Every lock write after the first join (which finds nothing) reaches MongoDB 1.5 s late.
    await failPoint(
      { skip: 1 },
      {
        failCommands: ['findAndModify'],
        appName: 'created-race',
        blockConnection: true,
        blockTimeMS: 1_500,
      },
    );
    const acquiring = docs.acquire('x', { createIfMissing: { balance: 0, opened: true } });
    await sleep(500);
    // The upsert is on its way: the application inserts the document, with no lock field.
    await accounts.insertOne({ _id: 'x', balance: 7 });
    const lock = await acquiring;
    await failPoint('off');
    const { created, doc } = lock;
    await lock.release();
    expect(created).toBe(false);
    // createIfMissing's fields are for a document the call creates.
    expect(doc).toEqual({ _id: 'x', balance: 7 });
  });
});
