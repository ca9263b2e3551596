// Adversarial review (attack-docs). Fails on the code it was written against.
//
// Promised (lib/errors/document-not-found.error.ts: `id` is "The `_id` that was asked for";
// VersionConflictError and DocumentLockedError carry the same `id`): `error.id` is the id the
// caller gave. What happens: for a number id it is a bson `Int32` (or `Double`) wrapper object,
// so `error.id === 5` is false, and so is every comparison an application makes with it.
// From: `documentIdOfKey` in lib/store/documents/document-key.ts parses the key with
// `relaxed: false`, and `documentNotFound` / `updateIfCurrent` (document-writes.ts) put that
// value into the errors.
import { DocumentLockedError, DocumentNotFoundError, VersionConflictError } from '../../lib/errors';
import { freshCollectionEachTest } from './fresh-collection';
import { LockTestKit, settle } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

describe('Document ids (adversarial review)', () => {
  const kit = LockTestKit.forSuite();
  const fresh = freshCollectionEachTest(kit, 'error_ids');

  describe('the id an error carries is the id asked for', () => {
    it('DocumentNotFoundError.id of a number id is that number', async () => {
      const documents = (await kit.service()).documents(fresh.name);
      const error = await settle(documents.acquire(5, { timeoutMs: 0 }));
      expect(error).toBeInstanceOf(DocumentNotFoundError);
      expect((error as DocumentNotFoundError).id).toBe(5);
    });

    it('VersionConflictError.id and DocumentLockedError.id of a number id are that number', async () => {
      await fresh.collection.insertOne({ _id: 7 as never, version: 1 });
      const documents = (await kit.service()).documents(fresh.name, {
        version: { field: 'version' },
      });
      const conflict = await settle(documents.updateIfCurrent(7, 3, { $set: { x: 1 } }));
      expect(conflict).toBeInstanceOf(VersionConflictError);
      expect((conflict as VersionConflictError).id).toBe(7);

      const handle = await documents.acquire(7);
      try {
        const locked = await settle(documents.updateIfCurrent(7, 1, { $set: { x: 1 } }));
        expect(locked).toBeInstanceOf(DocumentLockedError);
        expect((locked as DocumentLockedError).id).toBe(7);
      } finally {
        await handle.release();
      }
    });

    it('an embedded id keeps its numbers as numbers', async () => {
      const documents = (await kit.service()).documents(fresh.name);
      const error = await settle(documents.acquire({ shop: 2, sku: 'x' }, { timeoutMs: 0 }));
      expect(error).toBeInstanceOf(DocumentNotFoundError);
      expect((error as DocumentNotFoundError).id).toEqual({ shop: 2, sku: 'x' });
      expect(((error as DocumentNotFoundError).id as { shop: unknown }).shop).toBe(2);
    });
  });
});
