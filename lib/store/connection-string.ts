import { MongoClient } from 'mongodb';

/**
 * The driver's client of `uri`, or why it cannot read `uri` (an unknown option, a bad host list,
 * ...). It reads it as it makes a client, with no connection: so a typo fails where the options
 * are checked, not at the first command.
 */
export function readConnectionString(uri: string): MongoClient | Error {
  try {
    return new MongoClient(uri);
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

/**
 * Per service (by its resolved options), the client made from its `uri`. The driver warns of
 * what it reads in a URI (a deprecated option) each time it makes a client: the check's client
 * is the one every start uses (a failed start closes it; a closed client connects again).
 */
const uriClients = new WeakMap<object, MongoClient>();

/** Keeps the check's `client` for the service with `options`. */
export function keepUriClient(options: object, client: MongoClient): void {
  uriClients.set(options, client);
}

/** The client made from `uri` for the service with `options`: the check's, or a new one kept. */
export function uriClientOf(options: object, uri: string): MongoClient {
  let client = uriClients.get(options);
  if (client === undefined) uriClients.set(options, (client = new MongoClient(uri)));
  return client;
}
