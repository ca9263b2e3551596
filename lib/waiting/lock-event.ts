import type { ChangeStreamDocument, Long } from 'mongodb';
import type { LockEvent } from '../interfaces/lock-state.interface';
import type { LockDocument } from '../store/lock-document';
import { toBigInt } from '../store/bson-values';

type LockChange = ChangeStreamDocument<LockDocument>;

function eventTime(change: LockChange): Date {
  if ('wallTime' in change && change.wallTime instanceof Date) return change.wallTime;
  if ('clusterTime' in change && change.clusterTime) return new Date(change.clusterTime.t * 1000);
  return new Date();
}

function fenceOf(value: Long | number | bigint | null | undefined): bigint | null {
  return value == null ? null : toBigInt(value);
}

/**
 * Reads a change event of the lock collection as an acquisition, a release or a deletion.
 * Other changes (none pass the server-side filter, but a future server might add fields)
 * give `undefined`.
 *
 * @example
 * const event = toLockEvent(change); // { type: 'released', key: 'orders:42', ... }
 */
export function toLockEvent(change: LockChange): LockEvent | undefined {
  if (!('documentKey' in change) || typeof change.documentKey?._id !== 'string') return undefined;
  const key = change.documentKey._id;
  const at = eventTime(change);
  switch (change.operationType) {
    case 'delete':
      return { type: 'deleted', key, holderId: null, fence: null, at };
    case 'insert':
    case 'replace':
    case 'update': {
      const updated =
        change.operationType === 'update' ? change.updateDescription?.updatedFields : undefined;
      const full = change.fullDocument;
      // An update changes ownership only if it sets `owner`; the looked-up full document
      // may be newer than the change.
      const owner =
        change.operationType === 'update'
          ? updated && 'owner' in updated
            ? updated.owner
            : undefined
          : full?.owner;
      if (owner === undefined) return undefined;
      return {
        type: owner === null ? 'released' : 'acquired',
        key,
        holderId: updated?.holder ?? full?.holder ?? null,
        fence: fenceOf(updated?.fence ?? full?.fence),
        at,
      };
    }
    default:
      return undefined;
  }
}
