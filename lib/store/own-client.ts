import { MongoClient } from 'mongodb';

/**
 * How long the client created from `uri` looks for a server: half of `operationTimeoutMs`, or
 * 1 s less than it if that is longer. The driver's default, 30 s, outlasts our bound on every
 * command, which then cut the wait with no cause, however soon the driver knew why (a refused
 * connection, an unknown host). Well below the bound, the driver's error (and its reason)
 * arrives first even on a busy event loop, and the start has time left for a second try.
 */
export function serverSelectionTimeoutFor(operationTimeoutMs: number): number {
  return Math.max(Math.round(operationTimeoutMs / 2), operationTimeoutMs - 1_000);
}

/** Whether the connection string sets `option` (the driver reads option names in any case). */
export function uriSetsOption(uri: string, option: string): boolean {
  // Neither hosts nor (escaped) credentials may hold a `?`: the first one starts the options.
  const start = uri.indexOf('?');
  if (start < 0) return false;
  const names = [...new URLSearchParams(uri.slice(start + 1)).keys()];
  return names.some((name) => name.toLowerCase() === option.toLowerCase());
}

/**
 * Why the driver cannot read `uri` (an unknown option, a bad host list, ...), or undefined if it
 * can. It reads it as it makes a client, with no connection: so a typo fails where the options
 * are checked, not at the first command.
 */
export function connectionStringError(uri: string): Error | undefined {
  try {
    new MongoClient(uri);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

/**
 * The client the service creates from `uri`, with {@link serverSelectionTimeoutFor} unless the
 * URI sets its own (an options object would override the URI's). `connectTimeoutMS` stays the
 * driver's: it also bounds each new connection's handshake, which a slow link (TLS,
 * authentication) may need longer than one command's bound, and a connection that outlasts the
 * command that asked for it still serves the next.
 */
export function createOwnClient(uri: string, operationTimeoutMs: number): MongoClient {
  if (uriSetsOption(uri, 'serverSelectionTimeoutMS')) return new MongoClient(uri);
  return new MongoClient(uri, {
    serverSelectionTimeoutMS: serverSelectionTimeoutFor(operationTimeoutMs),
  });
}
