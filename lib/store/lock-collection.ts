import type { Collection, Document, MongoClient } from 'mongodb';
import { ReadPreference } from 'mongodb';

/**
 * A collection that holds locks (the lock collection, or one with document locks), with write
 * concern `majority` and read preference `primary`, whatever the client's defaults: a lock
 * acknowledged by one node only can vanish in a failover, and a secondary can show a lock that was released long ago. The client's
 * `wtimeoutMS` is kept (else `operationTimeoutMs`), so that without a reachable majority a
 * lock write fails instead of waiting for ever on the server.
 */
export function openLeaseCollection<T extends Document>(
  client: Pick<MongoClient, 'db'> & { readonly options?: Partial<MongoClient['options']> },
  dbName: string | undefined,
  collectionName: string,
  operationTimeoutMs: number,
): Collection<T> {
  const clientWriteConcern = client.options?.writeConcern;
  // `wtimeout` is the deprecated spelling that older drivers filled in.
  const wtimeoutMS = clientWriteConcern?.wtimeoutMS ?? clientWriteConcern?.wtimeout;
  return client.db(dbName).collection<T>(collectionName, {
    writeConcern: { w: 'majority', wtimeoutMS: wtimeoutMS ?? operationTimeoutMs },
    readPreference: ReadPreference.primary,
  });
}
