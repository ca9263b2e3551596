import type { MongoClient } from 'mongodb';
import { ReadPreference } from 'mongodb';
import type { LockDocument, LockCollection } from './lock-document';

/**
 * The lock collection with write concern `majority` and read preference `primary`,
 * whatever the client's defaults: a lock acknowledged by one node only can vanish in a
 * failover, and a secondary can show a lock that was released long ago. The client's
 * `wtimeoutMS` is kept (else `operationTimeoutMs`), so that without a reachable majority a
 * lock write fails instead of waiting for ever on the server.
 */
export function openLockCollection(
  client: Pick<MongoClient, 'db'> & { readonly options?: Partial<MongoClient['options']> },
  dbName: string | undefined,
  collectionName: string,
  operationTimeoutMs: number,
): LockCollection {
  const clientWriteConcern = client.options?.writeConcern;
  // `wtimeout` is the deprecated spelling that older drivers filled in.
  const wtimeoutMS = clientWriteConcern?.wtimeoutMS ?? clientWriteConcern?.wtimeout;
  return client.db(dbName).collection<LockDocument>(collectionName, {
    writeConcern: { w: 'majority', wtimeoutMS: wtimeoutMS ?? operationTimeoutMs },
    readPreference: ReadPreference.primary,
  });
}
