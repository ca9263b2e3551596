import type {
  Collection,
  Document,
  MongoClient,
  ReadConcernLike,
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
 * The driver gives a transaction the client's read concern, and MongoDB refuses a transaction
 * whose level is not `local`, `majority` or `snapshot` (InvalidOptions): every locked transaction
 * would fail. `linearizable` becomes `majority`: committed with write concern majority, as a
 * locked transaction is, it has read only majority-committed data; `available` becomes `local`,
 * the same on a replica set. A level a transaction takes stays the client's.
 */
function transactionReadConcern(client: ClientWithOptions): ReadConcernLike | undefined {
  const level = client.options?.readConcern?.level;
  if (level === 'linearizable') return { level: 'majority' };
  if (level === 'available') return { level: 'local' };
  return undefined;
}

/**
 * A locked transaction's options: its commit carries the check that the lock is held, a lock
 * write, so it is written as one; a transaction reads from the primary only; and with a read
 * concern a transaction takes.
 */
export function lockedTransactionOptions(
  client: ClientWithOptions,
  operationTimeoutMs: number,
): TransactionOptions {
  const writeConcern = lockWriteConcern(client, operationTimeoutMs);
  const readConcern = transactionReadConcern(client);
  return {
    readPreference: ReadPreference.primary,
    writeConcern,
    ...(readConcern && { readConcern }),
  };
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
