import type {
  Collection,
  Document,
  MongoClient,
  TransactionOptions,
  WriteConcernSettings,
} from 'mongodb';
import { ReadPreference } from 'mongodb';

type ClientWithOptions = Pick<MongoClient, 'db'> & {
  readonly options?: Partial<MongoClient['options']>;
};

/**
 * `majority`, with the client's `wtimeoutMS` (else `operationTimeoutMs`): without a majority a
 * lock write fails instead of waiting for ever.
 */
function lockWriteConcern(
  client: ClientWithOptions,
  operationTimeoutMs: number,
): WriteConcernSettings {
  const clientWriteConcern = client.options?.writeConcern;
  // `wtimeout`: the deprecated spelling older drivers fill in.
  const wtimeoutMS = clientWriteConcern?.wtimeoutMS ?? clientWriteConcern?.wtimeout;
  return { w: 'majority', wtimeoutMS: wtimeoutMS ?? operationTimeoutMs };
}

/**
 * A locked transaction's options: its commit carries the check that the lock is held, a lock
 * write, so it is written as one; and a transaction reads from the primary only.
 */
export function lockedTransactionOptions(
  client: ClientWithOptions,
  operationTimeoutMs: number,
): TransactionOptions {
  const writeConcern = lockWriteConcern(client, operationTimeoutMs);
  return { readPreference: ReadPreference.primary, writeConcern };
}

/**
 * A collection holding locks, with write concern `majority` and read preference `primary`
 * whatever the client's defaults: a lock acknowledged by one node can vanish in a failover, and
 * a secondary can show a long-released lock.
 */
export function openLeaseCollection<T extends Document>(
  client: ClientWithOptions,
  dbName: string | undefined,
  collectionName: string,
  operationTimeoutMs: number,
): Collection<T> {
  return client.db(dbName).collection<T>(collectionName, {
    writeConcern: lockWriteConcern(client, operationTimeoutMs),
    readPreference: ReadPreference.primary,
    // Values decoded as JavaScript's, whatever the client's BSON options (a client with
    // `promoteValues: false` would hand fences and permits over as BSON wrapper objects).
    raw: false,
    promoteValues: true,
    promoteLongs: true,
  });
}
