// BSON values made by a second copy of the `bson` package (an application's own `bson`, or a
// Mongoose with its own driver, same major version) are sent by the driver by their `_bsontype`:
// the library reads them by that too, never by `instanceof` on its own copy's classes.
import { firstValueFrom } from 'rxjs';
import type { Collection, Document } from 'mongodb';
import { keyOfDocumentId } from '../../lib/store/documents/document-key';
import { versionTag } from '../../lib/store/documents/document-version';
import { LockTestKit, listeningWhileHeld, settle } from '../lock-service/lock-test-kit';
import { LOAD_SLACK_MS } from '../support/load-slack';

jest.setTimeout(60_000);

/** A second instance of the `bson` module: its classes are not the driver's. */
function otherBson(): typeof import('bson') {
  let other: typeof import('bson') | undefined;
  jest.isolateModules(() => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    other = require('bson') as typeof import('bson');
  });
  return other!;
}

const Other = otherBson();

describe('BSON values from another copy of the bson package', () => {
  it('is another copy (its classes are not the driver’s)', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { Double } = require('mongodb') as typeof import('mongodb');
    expect(new Other.Double(1)).not.toBeInstanceOf(Double);
  });

  it.each([
    ['Double(1)', () => new Other.Double(1), 1],
    ['Double(-0)', () => new Other.Double(-0), 0],
    ['Double(2^60)', () => new Other.Double(2 ** 60), 2 ** 60],
    ['{ a: Double(1) }', () => ({ a: new Other.Double(1) }), { a: 1 }],
  ])('a foreign %s has the key of the number MongoDB matches it with', (_label, make, plain) => {
    expect(keyOfDocumentId(make())).toBe(keyOfDocumentId(plain));
  });

  it('versionTag reads a foreign Decimal128 version (the ETag of @VersionETag)', () => {
    expect(versionTag(Other.Decimal128.fromString('18'))).toBe('18');
  });

  describe('against MongoDB', () => {
    const kit = LockTestKit.forSuite();
    let seq = 0;
    let collectionName: string;
    let docs: Collection<Document>;

    beforeEach(async () => {
      seq += 1;
      collectionName = `foreign_bson_${seq}`;
      const client = await kit.client();
      docs = client.db(kit.mongo.dbName).collection<Document>(collectionName);
      await docs.insertOne({ _id: 1 as never, balance: 0, dec: Other.Decimal128.fromString('1') });
    });

    it('withLock re-enters for 1 and a foreign Double(1), which name the same document', async () => {
      const locks = (await kit.service({ shutdownGraceMs: 200 })).documents(collectionName);
      // MongoDB agrees they are one document.
      expect(await docs.findOne({ _id: new Other.Double(1) })).not.toBeNull();
      const result = await settle(
        locks.withLock(1, () =>
          locks.withLock(new Other.Double(1), () => 'inner', { timeoutMs: 500 }),
        ),
      );
      // Today: LockNotAcquiredError, the inner call waits for its own enclosing lock.
      expect(result).toBe('inner');
    });

    it('a waiter that named the document by a foreign Double(1) is woken by the release', async () => {
      const holder = (await kit.service({ shutdownGraceMs: 200 })).documents(collectionName);
      const client = await kit.client({ monitorCommands: true });
      const waiter = (
        await kit.service({ client, shutdownGraceMs: 200, safetyPollIntervalMs: 60_000 })
      ).documents(collectionName);
      const lock = await holder.acquire(1, { ttlMs: 20_000 });
      const listening = listeningWhileHeld(client, collectionName);
      const woken = firstValueFrom(waiter.waitForRelease(new Other.Double(1)));
      await listening;
      const freedAt = performance.now();
      await lock.release();
      await woken;
      // Today the change event's key ({"$numberInt":"1"}) is not the waiter's ("1.0"): it waits
      // for the lease end (20 s).
      expect(performance.now() - freedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    });

    it("idType 'objectId' takes a foreign ObjectId", async () => {
      const id = new Other.ObjectId();
      await docs.insertOne({ _id: id, balance: 0 });
      const locks = (await kit.service({ shutdownGraceMs: 200 })).documents(collectionName, {
        idType: 'objectId',
      });
      // Today: InvalidLockKeyError "is not an ObjectId".
      const lock = await locks.acquire(id);
      expect(lock.doc).toMatchObject({ balance: 0 });
      await lock.release();
    });

    it('createIfMissing takes a foreign Decimal128 (or Int32) version of the right type', async () => {
      const service = await kit.service({ shutdownGraceMs: 200 });
      const decimal = service.documents(collectionName, {
        version: { field: 'v', type: 'decimal128' },
      });
      // Today: InvalidLockOptionsError "must give ... a Decimal128 ..., got a Decimal128".
      const made = await decimal.acquire('d', {
        createIfMissing: { v: Other.Decimal128.fromString('5') },
      });
      expect(made.created).toBe(true);
      await made.release();
      const int = service.documents(collectionName, { version: { field: 'n' } });
      const other = await int.acquire('i', { createIfMissing: { n: new Other.Int32(5) } });
      expect(other.created).toBe(true);
      await other.release();
    });

    it('updateIfCurrent takes a foreign Decimal128 expected version', async () => {
      const locks = (await kit.service({ shutdownGraceMs: 200 })).documents(collectionName, {
        version: { field: 'dec', type: 'decimal128' },
      });
      // Today: InvalidLockOptionsError "expectedVersion must be a decimal128 version, got a Decimal128".
      const after = await locks.updateIfCurrent(1, Other.Decimal128.fromString('1'), {
        $set: { balance: 3 },
      });
      expect(after).toMatchObject({ balance: 3 });
    });
  });
});
