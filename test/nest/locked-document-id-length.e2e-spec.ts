// @LockedDocument renders a document's _id "as text, unescaped" (document-locks.md), and a key
// must be at most 512 UTF-8 bytes (http.md). The limit is the id's: an _id of 200 to 300 bytes
// whose characters key escaping would encode (':', '%', text of the template such as '-') is
// locked as any other id of its length, not refused for the 600 bytes of an escaped form the
// document never sees.
import { Injectable } from '@nestjs/common';
import { MongoClient } from 'mongodb';
import { LockedDoc, LockedDocument, type DocumentLockHandle, MongoLockModule } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(30_000);

@Injectable()
class Catalogue {
  @LockedDocument('items', '{args.0}')
  async tag(_id: string, @LockedDoc() lock?: DocumentLockHandle): Promise<unknown> {
    await lock!.commit({ $set: { tagged: true } });
    return lock!.doc._id;
  }

  @LockedDocument('items', 'sku-{args.0}')
  async tagSku(_id: string, @LockedDoc() lock?: DocumentLockHandle): Promise<unknown> {
    await lock!.commit({ $set: { tagged: true } });
    return lock!.doc._id;
  }
}

describe('@LockedDocument with an id of 200 to 300 bytes that key escaping would lengthen', () => {
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

  it.each([
    ['colons', 'tag', 'a:'.repeat(150), ''],
    ['percent signs', 'tag', '%'.repeat(200), ''],
    ["the template's own '-'", 'tagSku', '-'.repeat(200), 'sku-'],
  ] as const)('locks and commits an _id made of %s', async (_kind, method, value, prefix) => {
    const items = client.db(mongo.dbName).collection<{ _id: string; tagged?: boolean }>('items');
    const id = prefix + value;
    expect(Buffer.byteLength(id)).toBeLessThanOrEqual(512);
    await items.insertOne({ _id: id, tagged: false });
    const app = await startAppContext({
      imports: [
        lockModule(mongo, { isGlobal: true }),
        MongoLockModule.forFeature([{ name: 'items', collection: 'items' }]),
      ],
      providers: [Catalogue],
    });
    try {
      await expect(app.get(Catalogue)[method](value)).resolves.toBe(id);
      expect(await items.findOne({ _id: id })).toMatchObject({ tagged: true });
    } finally {
      await app.close();
    }
  });
});
