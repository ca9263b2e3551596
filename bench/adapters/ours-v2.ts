import { randomBytes } from 'node:crypto';
import type { MongoClient } from 'mongodb';
import { LineAcquirer } from '../../lib/line-acquirer';
import type { LineDocument } from '../../lib/store/line/line-document';
import { watchLines } from '../../lib/store/line/line-events';
import { LineStore } from '../../lib/store/line/line-store';
import { LineWaiters } from '../../lib/waiting/line-waiters';
import type { BenchLock } from './bench-lock';

/**
 * Engine v2 (ownership by position: lib/store/line, lib/line-acquirer.ts) driven directly,
 * before it is under `LockService`: what the new protocol costs in the shape matrix. No
 * renewals (the bench's lease outlasts every section), as for the other variants.
 */
export async function createLineLock(connection: {
  dbName: string;
  client: MongoClient;
}): Promise<BenchLock> {
  const collection = connection.client
    .db(connection.dbName)
    .collection<LineDocument>('locks', { writeConcern: { w: 'majority' } });
  const waiters = new LineWaiters();
  const holderId = `bench-${randomBytes(4).toString('hex')}`;
  const watch = watchLines(collection, holderId, (change) =>
    waiters.heard(change.key, change.holders),
  );
  await watch.opened;
  const acquirer = new LineAcquirer({
    store: new LineStore(collection, { operationTimeoutMs: 5_000, idleRetentionMs: 60_000 }),
    waiters,
    holderId,
  });
  return {
    async acquire(key, timeoutMs) {
      const hold = await acquirer.acquire({
        key,
        kind: { mode: 'exclusive' },
        ttlMs: 30_000,
        timeoutMs,
      });
      return {
        release: async () => {
          await acquirer.release(hold);
        },
      };
    },
    close: () => watch.close(),
  };
}
