import type { Collection, Document, MongoClient } from 'mongodb';
import { ReadPreference } from 'mongodb';

/**
 * A collection holding locks, with write concern `majority` and read preference `primary`
 * whatever the client's defaults: a lock acknowledged by one node can vanish in a failover, and
 * a secondary can show a long-released lock. `wtimeoutMS` is the client's (else
 * `operationTimeoutMs`), so without a majority a lock write fails instead of waiting for ever.
 */
export function openLeaseCollection<T extends Document>(
  client: Pick<MongoClient, 'db'> & { readonly options?: Partial<MongoClient['options']> },
  dbName: string | undefined,
  collectionName: string,
  operationTimeoutMs: number,
): Collection<T> {
  const clientWriteConcern = client.options?.writeConcern;
  // `wtimeout`: the deprecated spelling older drivers fill in.
  const wtimeoutMS = clientWriteConcern?.wtimeoutMS ?? clientWriteConcern?.wtimeout;
  return client.db(dbName).collection<T>(collectionName, {
    writeConcern: { w: 'majority', wtimeoutMS: wtimeoutMS ?? operationTimeoutMs },
    readPreference: ReadPreference.primary,
    // Values decoded as JavaScript's, whatever the client's BSON options (a client with
    // `promoteValues: false` would hand fences and permits over as BSON wrapper objects).
    raw: false,
    promoteValues: true,
    promoteLongs: true,
  });
}
