import type { Collection, Document } from 'mongodb';
import type { LockTestKit } from '../lock-service/lock-test-kit';

/** A suite's collection, a new one (`<prefix>_<n>`) before each test. */
export interface FreshCollection {
  collection: Collection<Document>;
  name: string;
}

/** Registers a `beforeEach` that gives each test of the suite a collection of its own. */
export function freshCollectionEachTest(kit: LockTestKit, prefix: string): FreshCollection {
  const fresh = {} as FreshCollection;
  let seq = 0;
  beforeEach(async () => {
    seq += 1;
    fresh.name = `${prefix}_${seq}`;
    fresh.collection = (await kit.client()).db(kit.mongo.dbName).collection<Document>(fresh.name);
  });
  return fresh;
}
