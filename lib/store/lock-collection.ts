import type { MongoClient } from 'mongodb';
import { ReadPreference } from 'mongodb';
import type { LockDocument, LockCollection } from './lock-document';

/**
 * The lock collection with write concern `majority` and read preference `primary`,
 * whatever the client's defaults: a lock acknowledged by one node only can vanish in a
 * failover, and a secondary can show a lock that was released long ago.
 */
export function openLockCollection(
  client: Pick<MongoClient, 'db'>,
  dbName: string | undefined,
  collectionName: string,
): LockCollection {
  return client.db(dbName).collection<LockDocument>(collectionName, {
    writeConcern: { w: 'majority' },
    readPreference: ReadPreference.primary,
  });
}
