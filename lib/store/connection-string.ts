import { MongoClient } from 'mongodb';

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
