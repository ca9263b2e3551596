// `created` says whether this call's join made the document: a document the application
// inserts while the lock's upsert is on its way is not one (and createIfMissing stays out of it).
import type { CommandStartedEvent, Document } from 'mongodb';
import { LockTestKit } from '../lock-service/lock-test-kit';
import { describeWithFailPoints, faultTools } from '../lock-service/adversarial/kit';

jest.setTimeout(30_000);

describeWithFailPoints('document locks: created', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('a document inserted by the application just before the upsert is not reported created', async () => {
    const client = await appClient('created-race', { monitorCommands: true });
    const joins: Document[] = [];
    let upsertSent!: () => void;
    const upserting = new Promise<void>((resolve) => (upsertSent = resolve));
    client.on('commandStarted', ({ commandName, command }: CommandStartedEvent) => {
      if (commandName !== 'findAndModify') return;
      joins.push(command);
      if (command.upsert === true) upsertSent();
    });
    const docs = (await kit.service({ client })).documents<Document>('created_race');
    const accounts = client
      .db(kit.mongo.dbName)
      .collection<{ _id: string; balance: number }>('created_race');
    // Every lock write after the first join (which finds nothing) reaches MongoDB 2 s late.
    await failPoint(
      { skip: 1 },
      {
        failCommands: ['findAndModify'],
        appName: 'created-race',
        blockConnection: true,
        blockTimeMS: 2_000,
      },
    );
    const acquiring = docs.acquire('x', { createIfMissing: { balance: 0, opened: true } });
    // The upsert is on its way: the application inserts the document, with no lock field.
    await upserting;
    await accounts.insertOne({ _id: 'x', balance: 7 });
    const lock = await acquiring;
    const sentToAcquire = joins.map((join) => join.upsert === true);
    await failPoint('off');
    const { created, doc } = lock;
    await lock.release();
    // The race was run: a join found nothing, the upsert collided, a third join found ours.
    expect(sentToAcquire).toEqual([false, true, false]);
    expect(created).toBe(false);
    // createIfMissing's fields are for a document the call creates.
    expect(doc).toEqual({ _id: 'x', balance: 7 });
  });
});
