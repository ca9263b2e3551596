import type { ChangeStreamDocument, Long, Timestamp } from 'mongodb';
import type { LockEvent } from '../interfaces/lock-state.interface';
import type { LockDocument } from '../store/lock-document';
import { toBigInt } from '../store/bson-values';

export type LockChange = ChangeStreamDocument<LockDocument>;

function eventTime(change: LockChange): Date {
  if ('wallTime' in change && change.wallTime instanceof Date) return change.wallTime;
  if ('clusterTime' in change && change.clusterTime) return new Date(change.clusterTime.t * 1000);
  return new Date();
}

function fenceOf(value: Long | number | bigint | null | undefined): bigint | null {
  return value == null ? null : toBigInt(value);
}

function sameFence(a: Long | number | bigint | null | undefined, b: bigint | null): boolean {
  return a != null && b !== null && toBigInt(a) === b;
}

/**
 * A shared or permit holder's grant (the key's fence moved), or a release (`frees` counts
 * it). The release carries the holder it freed when that changed; a grant is reported without
 * a holder id (the entry is not in the update description's top level).
 */
function holderEntryEvent(
  key: string,
  updated: Partial<LockDocument>,
  at: Date,
): LockEvent | undefined {
  if ('fence' in updated) {
    return { type: 'acquired', key, holderId: null, fence: fenceOf(updated.fence), at };
  }
  // `frees` alone (a waiting process left the line) is no release.
  if ('frees' in updated && 'releasedFence' in updated) {
    const fence = fenceOf(updated.releasedFence);
    return { type: 'released', key, holderId: updated.releasedHolder ?? null, fence, at };
  }
  return undefined;
}

/**
 * What a change means to waiting processes: `released` when it may let waiters in (the lock
 * freed or deleted; a release of a holder entry or a reservation, counted in `frees`),
 * `granted` when it hands the lock to this process (`grantee`, see `direct-grant.ts`), else
 * nothing: an acquisition, or a grant to another process.
 */
export function waiterSignal(
  change: LockChange,
  grantee: string | undefined,
): 'released' | 'granted' | undefined {
  switch (change.operationType) {
    case 'delete':
      return 'released';
    case 'insert':
    case 'replace':
      return change.fullDocument?.owner === null ? 'released' : undefined;
    case 'update': {
      const updated = change.updateDescription?.updatedFields;
      if (!updated) return undefined;
      if (grantee !== undefined && updated.grantee === grantee) return 'granted';
      if ('frees' in updated) return 'released';
      return 'owner' in updated && updated.owner === null ? 'released' : undefined;
    }
    default:
      return undefined;
  }
}

/**
 * Reads a change event of the lock collection as an acquisition, a release or a deletion.
 * Other changes (none pass the server-side filter, but a future server might add fields)
 * give `undefined`.
 *
 * The update description has only the fields that changed, and the looked-up full document
 * may already be a later state (the next holder's), so the fence comes from the change
 * itself, and the holder from the full document only when that document is still the same
 * acquisition (or release); otherwise `holderId` is `null`, never someone else's.
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
    case 'replace': {
      const full = change.fullDocument;
      // The first grant of a new key to a shared holder or permit holder.
      if (full && full.owner === undefined && full.holders) {
        return { type: 'acquired', key, holderId: null, fence: fenceOf(full.fence), at };
      }
      if (!full || full.owner === undefined) return undefined;
      return {
        type: full.owner === null ? 'released' : 'acquired',
        key,
        holderId: full.holder ?? null,
        fence: fenceOf(full.fence),
        at,
      };
    }
    case 'update': {
      const updated = change.updateDescription?.updatedFields;
      if (!updated) return undefined;
      const full = change.fullDocument;
      if (!('owner' in updated)) return holderEntryEvent(key, updated, at);
      if (updated.owner === null) {
        const fence = fenceOf(updated.releasedFence);
        const sameRelease = sameFence(full?.releasedFence, fence);
        return {
          type: 'released',
          key,
          holderId: sameRelease ? (full?.releasedHolder ?? null) : null,
          fence,
          at,
        };
      }
      // A grant's confirmation (the grantee's token in place of the placeholder): the key
      // changed hands at the grant already.
      if (!('fence' in updated)) return undefined;
      const fence = fenceOf(updated.fence);
      const sameAcquisition = sameFence(full?.fence, fence);
      return {
        type: 'acquired',
        key,
        holderId: updated.holder ?? (sameAcquisition ? (full?.holder ?? null) : null),
        fence,
        at,
      };
    }
    default:
      return undefined;
  }
}

/** What the change feed takes from one change: events for `events$`, a signal for waiters. */
export interface ReadChange {
  /** The lock key the change is about. */
  key: string | undefined;
  events: LockEvent[];
  signal: 'released' | 'granted' | undefined;
  /** With `granted`: what the change says of the grant (see {@link GrantNews}). */
  grant?: GrantNews;
}

/** What a process hears of a grant to it. */
export interface GrantNews {
  /**
   * The grant's fence (a process that already holds the key by it knows the news is old); told
   * by this process's own release, a lower bound of it.
   */
  fence: bigint;
  /**
   * From a change event: the reservation granted and the grant's placeholder owner, under
   * which the grantee may hold the lock at once (see `KeyQueue`).
   */
  reservation?: string;
  owner?: string;
  /** The change's cluster time (added by the change feed). */
  at?: Timestamp;
}

/**
 * Reads changes of the lock collection for a process whose holder id is `grantee`. A release
 * that hands the lock on (see `direct-grant.ts`) is two events: the release and the grant.
 */
export function readLockChange(grantee: string | undefined) {
  return (change: LockChange): ReadChange => {
    const event = toLockEvent(change);
    const signal = waiterSignal(change, grantee);
    // Some changes wake waiters without being an event (a waiting process left the line).
    const key =
      'documentKey' in change && typeof change.documentKey?._id === 'string'
        ? change.documentKey._id
        : undefined;
    const updated =
      change.operationType === 'update' ? change.updateDescription?.updatedFields : undefined;
    if (event?.type === 'acquired' && updated && 'releasedFence' in updated) {
      // Unchanged (a transfer within one process): from the looked-up document, if it is
      // still this release's.
      const fence = fenceOf(updated.releasedFence);
      const full = change.operationType === 'update' ? change.fullDocument : undefined;
      const releasedHolder =
        updated.releasedHolder ??
        (sameFence(full?.releasedFence, fence) ? (full?.releasedHolder ?? null) : null);
      const released: LockEvent = {
        type: 'released',
        key: event.key,
        holderId: releasedHolder,
        fence,
        at: event.at,
      };
      return { key, events: [released, event], signal, ...grantNews(signal, updated) };
    }
    return { key, events: event ? [event] : [], signal, ...grantNews(signal, updated) };
  };
}

function grantNews(
  signal: ReadChange['signal'],
  updated: Partial<LockDocument> | undefined,
): { grant?: GrantNews } {
  if (signal !== 'granted' || updated?.fence == null) return {};
  const { grantedTo, owner } = updated;
  return {
    grant: {
      fence: toBigInt(updated.fence),
      ...(typeof grantedTo === 'string' && typeof owner === 'string'
        ? { reservation: grantedTo, owner }
        : {}),
    },
  };
}
