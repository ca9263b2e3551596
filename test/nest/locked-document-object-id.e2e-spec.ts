// A provider method called with an ObjectId (as a repository passes ids around) locks that
// document: the template renders the id as its hex, which the collection's idType reads back.
import { Injectable } from '@nestjs/common';
import { MongoClient, ObjectId } from 'mongodb';
import { LockedDoc, LockedDocument, type DocumentLockHandle, MongoLockModule } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(30_000);

@Injectable()
class Orders {
  @LockedDocument('orders', '{args.0}')
  async ship(_id: ObjectId, @LockedDoc() lock?: DocumentLockHandle): Promise<unknown> {
    await lock!.commit({ $set: { shipped: true } });
    return lock!.doc._id;
  }
}

describe('@LockedDocument with an ObjectId argument', () => {
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

  it("locks and commits the document of that _id (idType: 'objectId')", async () => {
    const orders = client.db(mongo.dbName).collection('orders');
    const id = new ObjectId();
    await orders.insertOne({ _id: id, shipped: false });
    const app = await startAppContext({
      imports: [
        lockModule(mongo, { isGlobal: true }),
        MongoLockModule.forFeature([{ name: 'orders', collection: 'orders', idType: 'objectId' }]),
      ],
      providers: [Orders],
    });
    try {
      const locked = await app.get(Orders).ship(id);
      expect(locked).toBeInstanceOf(ObjectId);
      expect(String(locked)).toBe(id.toHexString());
      expect(await orders.findOne({ _id: id })).toMatchObject({ shipped: true });
    } finally {
      await app.close();
    }
  });
});
