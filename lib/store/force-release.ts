import type { LockHolderState } from '../interfaces/lock-state.interface';
import { REMAINING_LEASE_MS } from './bson-values';
import type { BsonInteger } from './bson-values';
import { cleared, gcNotBeforeNextFence } from './direct-grant';
import { latestEntryEnd } from './holder-entries';
import { decodeHolderEntry } from './inspect-lock';
import type { LockCollection } from './lock-document';
import { EXCLUSIVE_LIVE, LIVE_HOLDERS } from './lock-modes';

const NOW = '$$NOW';

interface HolderReply {
  holder: string | null;
  fence: BsonInteger;
  weight: BsonInteger;
  remainingMs: BsonInteger;
  scope?: string | null;
}

/** Who held the key just before the write, read from the same document it changed. */
const RELEASED_HOLDERS = {
  _id: 0,
  exclusive: {
    $cond: [
      EXCLUSIVE_LIVE,
      [
        {
          holder: '$holder',
          fence: '$fence',
          weight: 1,
          remainingMs: REMAINING_LEASE_MS,
          scope: '$scope',
        },
      ],
      [],
    ],
  },
  entries: {
    $map: {
      input: LIVE_HOLDERS,
      in: {
        holder: '$$this.v.holder',
        fence: '$$this.v.fence',
        weight: '$$this.v.weight',
        remainingMs: { $subtract: ['$$this.v.expiresAt', NOW] },
        scope: '$$this.v.scope',
      },
    },
  },
};

/**
 * Frees every live lease of `key`, whoever holds it, in one write decided by the server clock,
 * the way `releaseScope` frees a scope's: the exclusive lease is released (`owner: null`, with
 * `releasedHolder` and `releasedFence` for the release event) and live holder entries are
 * removed (`frees` counts it, which wakes their waiters). Holders elsewhere learn it at their
 * next renewal, as their owner token no longer matches; the fence is untouched, so the next
 * holder's is larger. A key with nothing live is not written. Resolves to who was released.
 *
 * @example
 * const released = await forceRelease(collection, 'orders:42', 24 * 3600_000);
 */
export async function forceRelease(
  collection: LockCollection,
  key: string,
  idleRetentionMs: number,
): Promise<LockHolderState[]> {
  const entriesFreed = { $gt: [{ $size: '$_n' }, 0] };
  const keptEntries = {
    $arrayToObject: {
      $filter: {
        input: { $objectToArray: '$holders' },
        cond: { $not: [{ $in: ['$$this.k', '$_n.k'] }] },
      },
    },
  };
  const before = (await collection.findOneAndUpdate(
    { _id: key, $or: [{ owner: { $ne: null } }, { holders: { $type: 'object' } }] },
    [
      { $set: { _x: EXCLUSIVE_LIVE, _n: LIVE_HOLDERS } },
      {
        $set: {
          owner: { $cond: ['$_x', null, '$owner'] },
          // A hand-off not yet confirmed is freed too: nobody is granted it any more.
          grantedTo: { $cond: ['$_x', cleared('$grantedTo'), '$grantedTo'] },
          grantee: { $cond: ['$_x', cleared('$grantee'), '$grantee'] },
          releasedHolder: { $cond: ['$_x', '$holder', '$releasedHolder'] },
          releasedFence: { $cond: ['$_x', '$fence', '$releasedFence'] },
          holders: { $cond: [entriesFreed, keptEntries, '$holders'] },
          frees: { $cond: [entriesFreed, { $add: [{ $ifNull: ['$frees', 0] }, 1] }, '$frees'] },
          // Nothing live any more: the idle document is scheduled for deletion.
          gcAt: {
            $cond: [
              '$_x',
              gcNotBeforeNextFence({ $max: [{ $add: [NOW, idleRetentionMs] }, '$expiresAt'] }),
              {
                $cond: [
                  entriesFreed,
                  gcNotBeforeNextFence({
                    $max: [{ $add: [NOW, idleRetentionMs] }, latestEntryEnd],
                  }),
                  '$gcAt',
                ],
              },
            ],
          },
        },
      },
      { $unset: ['_x', '_n'] },
    ],
    { returnDocument: 'before', projection: RELEASED_HOLDERS },
  )) as { exclusive: HolderReply[]; entries: HolderReply[] } | null;
  if (before === null) return [];
  return [...before.exclusive, ...before.entries]
    .map(decodeHolderEntry)
    .sort((a, b) => Number(a.fence - b.fence));
}
