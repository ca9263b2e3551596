import type { LockCollection } from './lock-document';

export const GC_INDEX_NAME = 'gcAt_ttl';

/**
 * Creates the lock collection's indexes; safe to run on every start (creating an existing
 * identical index is a no-op on the server).
 * - `gcAt` TTL: deletes idle documents after `idleRetentionMs`. Only `gcAt` is indexed for
 *   TTL, never `expiresAt`: deleting a live lease's document would reset its fence.
 *
 * @example
 * await ensureLockIndexes(collection);
 */
export async function ensureLockIndexes(collection: LockCollection): Promise<void> {
  await collection.createIndexes([
    { key: { gcAt: 1 }, name: GC_INDEX_NAME, expireAfterSeconds: 0 },
  ]);
}
