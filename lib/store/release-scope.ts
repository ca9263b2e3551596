import { gcNotBeforeNextFence } from './direct-grant';
import type { LockCollection } from './lock-document';

/**
 * Frees every live lease of `scope`, whoever holds it, in one `updateMany` decided by the
 * server clock. Holders elsewhere learn it at their next renewal (their owner token no
 * longer matches); waiters wake on the release events. Resolves to how many were freed.
 *
 * @example
 * const freed = await releaseScope(collection, 'session:42', 24 * 3600_000);
 */
export async function releaseScope(
  collection: LockCollection,
  scope: string,
  idleRetentionMs: number,
): Promise<number> {
  const result = await collection.updateMany(
    { scope, owner: { $ne: null }, $expr: { $gt: ['$expiresAt', '$$NOW'] } },
    [
      {
        $set: {
          owner: null,
          gcAt: gcNotBeforeNextFence({
            $max: [{ $add: ['$$NOW', idleRetentionMs] }, '$expiresAt'],
          }),
          releasedHolder: '$holder',
          releasedFence: '$fence',
        },
      },
    ],
  );
  return result.modifiedCount;
}
