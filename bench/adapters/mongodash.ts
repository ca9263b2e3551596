import type { MongoClient } from 'mongodb';
import * as mongodash from 'mongodash';
import type { BenchLock } from './bench-lock';

/**
 * mongodash's `withLock(key, callback)` holds the lock for the callback's duration, so a held
 * lock here is a callback parked on a promise; `release()` settles it and waits for
 * `withLock` to delete the lock document. Its options are left at their documented defaults
 * (first retry after 50 ms, doubling, at most a third of `maxWaitForLock`), except the wait.
 */
export async function createMongodashLock(connection: {
  uri: string;
  client?: MongoClient;
}): Promise<BenchLock> {
  await mongodash.init({
    ...(connection.client ? { mongoClient: connection.client } : { uri: connection.uri }),
    onError: () => undefined,
    onInfo: () => undefined,
  });
  return {
    acquire(key, timeoutMs) {
      return new Promise((resolveHeld, rejectHeld) => {
        let finish: () => void = () => undefined;
        const done = mongodash.withLock(
          key,
          () =>
            new Promise<void>((resolveCallback) => {
              finish = resolveCallback;
              resolveHeld({
                release: async () => {
                  finish();
                  await done;
                },
              });
            }),
          { maxWaitForLock: timeoutMs },
        );
        done.catch(rejectHeld);
      });
    },
    close: async () => {
      await mongodash.getMongoClient().close();
    },
  };
}
