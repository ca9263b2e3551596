// The document locks' store (lib/store/documents/document-line-store.ts) against a MongoDB over
// the wire: how it reads the replies of its writes.
import { randomBytes } from 'node:crypto';
import type { Collection, Document } from 'mongodb';
import { keyOfDocumentId } from '../../lib/store/documents/document-key';
import { DocumentLineFields } from '../../lib/store/documents/document-line';
import { DocumentLineStore } from '../../lib/store/documents/document-line-store';
import type { DocumentCollection } from '../../lib/store/documents/document-writes';
import { LockTestKit } from '../lock-service/lock-test-kit';
import { interceptedCollection } from '../support/intercepted-collection';

const kit = LockTestKit.forSuite();
const token = () => randomBytes(12).toString('base64url');
// A document lock's key: its document's `_id` in canonical extended JSON.
const KEY = keyOfDocumentId('a');

/**
 * The collection as a driver-retried write sees it: mongod may answer a findAndModify retried
 * after it had landed with the stored document, without the projection (SERVER-31242). The
 * write itself runs on the server as usual.
 */
function answeredWithStoredImages(collection: Collection<Document>): DocumentCollection {
  return interceptedCollection(collection, (target, args) => {
    const [filter, update, options] = args as unknown as [Document, Document, Document];
    const { projection: _dropped, ...unprojected } = options;
    return target.findOneAndUpdate(filter, update, unprojected);
  });
}

describe('DocumentLineStore', () => {
  it("reads a stored image by its lock field, not by a user's own field named now", async () => {
    const client = await kit.client();
    const collection = client.db(kit.mongo.dbName).collection(`${kit.collectionName}_docs`);
    // The user's own `now`, long past: read as the server time, every lease would be live and
    // the line empty.
    await collection.insertOne({ _id: 'a' as unknown as Document['_id'], now: new Date(0) });
    const fields = new DocumentLineFields('_lock');
    const plain = new DocumentLineStore(collection, fields, 5_000);
    const retried = new DocumentLineStore(answeredWithStoredImages(collection), fields, 5_000);
    const [holder, waiter] = [token(), token()];
    const join = (store: DocumentLineStore, t: string) =>
      store.join({
        key: KEY,
        token: t,
        holderId: 'h',
        ttlMs: 30_000,
        kind: { mode: 'exclusive' },
        onlyIfHolds: false,
      });

    expect(await join(plain, holder)).toMatchObject({ joined: true, holds: true });
    expect(await join(retried, waiter)).toMatchObject({ joined: true, holds: false });
    const renewed = await retried.renew(KEY, holder, 30_000);
    expect(renewed).toMatchObject({ renewed: true, holds: true });
    expect(renewed.renewed && renewed.remainingMs).toBeGreaterThan(20_000);
    // A stored image has no time of its own to name the next holders by: the change stream
    // tells them (read by the user's `now`, the waiter would be named here).
    expect(await retried.leave(KEY, holder)).toEqual({ left: true, holders: [] });
    expect(await plain.place(KEY, waiter)).toMatchObject({ holds: true });
  });

  it('never shortens a lease by a renewal; an exact one (expireIn) does', async () => {
    const client = await kit.client();
    const collection = client.db(kit.mongo.dbName).collection(`${kit.collectionName}_renew`);
    await collection.insertOne({ _id: 'a' as unknown as Document['_id'] });
    const store = new DocumentLineStore(collection, new DocumentLineFields('_lock'), 5_000);
    const holder = token();
    const joined = await store.join({
      key: KEY,
      token: holder,
      holderId: 'h',
      ttlMs: 30_000,
      kind: { mode: 'exclusive' },
      onlyIfHolds: false,
    });
    expect(joined).toMatchObject({ joined: true, holds: true });
    // A renewal for 1 s that lands late must not cut the 30 s another one promised.
    const shorter = await store.renew(KEY, holder, 1_000);
    expect(shorter.renewed && shorter.remainingMs).toBeGreaterThan(20_000);
    const exact = await store.renew(KEY, holder, 1_000, true);
    expect(exact.renewed && exact.remainingMs).toBeLessThanOrEqual(1_000);
  });
});
