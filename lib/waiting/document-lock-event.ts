import type { LockEvent } from '../interfaces/lock-state.interface';
import { keyOfDocumentId } from '../store/documents/document-key';
import type { LockChange, ReadChange } from './lock-event';

/**
 * Reads a change that passed a document-lock stream's filter (every one of them can free a
 * lock: a release, a commit, the lock field removed, the document replaced or deleted) as a
 * release of that document's key.
 */
export function toDocumentLockEvent(change: LockChange): LockEvent | undefined {
  if (!('documentKey' in change) || change.documentKey?._id === undefined) return undefined;
  const at = 'wallTime' in change && change.wallTime instanceof Date ? change.wallTime : new Date();
  return {
    type: change.operationType === 'delete' ? 'deleted' : 'released',
    key: keyOfDocumentId(change.documentKey._id),
    holderId: null,
    fence: null,
    at,
  };
}

/** Every change a document-lock stream passes may free a lock: each one wakes its waiters. */
export function readDocumentLockChange(change: LockChange): ReadChange {
  const event = toDocumentLockEvent(change);
  return event
    ? { key: event.key, events: [event], signal: 'released' }
    : { key: undefined, events: [], signal: undefined };
}
