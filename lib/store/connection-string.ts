import { MongoClient } from 'mongodb';

/**
 * The clients made by {@link connectionStringError}, by `uri`, each kept for the first store
 * that opens with it: the driver reads a URI only as it makes a client, and warns of what it
 * reads (a deprecated option) each time. A client that no store takes holds no connection.
 */
const checkedClients = new Map<string, MongoClient>();

/**
 * Why the driver cannot read `uri` (an unknown option, a bad host list, ...), or undefined if it
 * can. It reads it as it makes a client, with no connection: so a typo fails where the options
 * are checked, not at the first command.
 */
export function connectionStringError(uri: string): Error | undefined {
  try {
    checkedClients.set(uri, new MongoClient(uri));
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

/** A client of `uri`: the one its check made, or (taken already) a new one. */
export function clientOf(uri: string): MongoClient {
  const checked = checkedClients.get(uri);
  checkedClients.delete(uri);
  return checked ?? new MongoClient(uri);
}
