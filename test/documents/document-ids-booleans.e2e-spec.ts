// Adversarial review (attack-docs). Fails on the code it was written against.
//
// Promised (docs/document-locks.md, "Ids are used as given"; the refused ids are listed: `$`
// operators, a RegExp, an array, a lone surrogate): any `_id` MongoDB stores can be locked.
// What happens: an `_id` that is a boolean, or an embedded id holding a boolean or null
// (`{ tenant: 'a', archived: false }`, a common compound key), is refused with
// InvalidLockKeyError "is not a usable _id", so such documents can never be locked.
// From: `isIdValue` in lib/documents/document-input.ts accepts strings, numbers, bigints, dates,
// BSON values and plain documents, and nothing else (no boolean, no nested null).
import { freshCollectionEachTest } from './fresh-collection';
import { LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

describe('Document ids (adversarial review)', () => {
  const kit = LockTestKit.forSuite();
  const fresh = freshCollectionEachTest(kit, 'bool_ids');

  describe('ids that MongoDB stores and the library refuses', () => {
    it.each<[string, unknown]>([
      ['a boolean', true],
      ['an embedded id holding a boolean', { tenant: 'a', archived: false }],
      ['an embedded id holding null', { tenant: 'a', region: null }],
    ])('%s can be locked and committed', async (_kind, id) => {
      await fresh.collection.insertOne({ _id: id as never, n: 1 });
      const documents = (await kit.service()).documents(fresh.name);
      const handle = await documents.acquire(id, { timeoutMs: 2_000 });
      expect(handle.doc).toMatchObject({ n: 1 });
      await handle.commit({ $inc: { n: 1 } });
      expect(await fresh.collection.findOne({ _id: id as never })).toMatchObject({ n: 2 });
    });
  });
});
