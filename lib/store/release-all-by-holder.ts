import type { LockCollection } from './lock-document';

/**
 * Releases every lock that names `holder`, in one command; returns how many were held.
 * For shutdown and for "this instance must let go of everything now".
 *
 * @example
 * const released = await releaseAllByHolder(collection, { holder: service.holderId, idleRetentionMs });
 */
export async function releaseAllByHolder(
  collection: LockCollection,
  { holder, idleRetentionMs }: { holder: string; idleRetentionMs: number },
): Promise<number> {
  const result = await collection.updateMany({ holder, owner: { $ne: null } }, [
    { $set: { owner: null, gcAt: { $add: ['$$NOW', idleRetentionMs] } } },
  ]);
  return result.modifiedCount;
}
