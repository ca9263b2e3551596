// What every spec test runs with: the server under test and the runner's own client to it.
import type { MongoClient } from 'mongodb';
import type { ServerInfo } from './server-info';

export interface RunContext {
  /** Connection string of the server under test, before any test's own URI options. */
  uri: string;
  /** The "internal MongoClient": set-up, outcome checks, and assertions the spec gives it. */
  internalClient: MongoClient;
  server: ServerInfo;
}
