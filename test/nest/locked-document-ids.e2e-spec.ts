// @LockedDocument renders a document's _id "as text, unescaped" (document-locks.md), read back
// by the collection's idType:
// - a provider method called with an ObjectId (as a repository passes ids around) locks that
//   document: the template renders the id as its hex;
// - a key is at most 512 UTF-8 bytes (http.md), and the limit is the id's: an _id of 200 to
//   300 bytes whose characters key escaping would encode (':', '%', the template's own text
//   such as '-') is locked as any other id of its length, not refused for the 600 bytes of an
//   escaped form the document never sees.
import { Injectable } from '@nestjs/common';
import { MongoClient, ObjectId } from 'mongodb';
import { LockedDoc, LockedDocument, type DocumentLockHandle, MongoLockModule } from '../../lib';
import type { DocumentLocksOptions } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(30_000);

@Injectable()
class Items {
  @LockedDocument('items', '{args.0}')
  async tag(_id: unknown, @LockedDoc() lock?: DocumentLockHandle): Promise<unknown> {
    await lock!.commit({ $set: { tagged: true } });
    return lock!.doc._id;
  }

  @LockedDocument('items', 'sku-{args.0}')
  async tagSku(_id: string, @LockedDoc() lock?: DocumentLockHandle): Promise<unknown> {
    await lock!.commit({ $set: { tagged: true } });
    return lock!.doc._id;
  }
}

describe('@LockedDocument ids', () => {
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

  /** Runs `call` in an app whose `items` collection reads ids as `idType` (default: as given). */
  async function inApp<T>(
    idType: DocumentLocksOptions['idType'],
    call: (items: Items) => Promise<T>,
  ): Promise<T> {
    const app = await startAppContext({
      imports: [
        lockModule(mongo, { isGlobal: true }),
        MongoLockModule.forFeature([{ name: 'items', collection: 'items', idType }]),
      ],
      providers: [Items],
    });
    try {
      return await call(app.get(Items));
    } finally {
      await app.close();
    }
  }
  const items = () =>
    client.db(mongo.dbName).collection<{ _id: ObjectId | string; tagged?: boolean }>('items');

  it("an ObjectId argument: locks and commits the document of that _id (idType: 'objectId')", async () => {
    const id = new ObjectId();
    await items().insertOne({ _id: id, tagged: false });
    const locked = await inApp('objectId', (service) => service.tag(id));
    expect(locked).toBeInstanceOf(ObjectId);
    expect(String(locked)).toBe(id.toHexString());
    expect(await items().findOne({ _id: id })).toMatchObject({ tagged: true });
  });

  it.each([
    ['colons', 'tag', 'a:'.repeat(150), ''],
    ['percent signs', 'tag', '%'.repeat(200), ''],
    ["the template's own '-'", 'tagSku', '-'.repeat(200), 'sku-'],
  ] as const)(
    'an _id of 200 to 300 bytes made of %s: locked and committed',
    async (_kind, method, value, prefix) => {
      const id = prefix + value;
      expect(Buffer.byteLength(id)).toBeLessThanOrEqual(512);
      await items().insertOne({ _id: id, tagged: false });
      await expect(inApp(undefined, (service) => service[method](value))).resolves.toBe(id);
      expect(await items().findOne({ _id: id })).toMatchObject({ tagged: true });
    },
  );
});
