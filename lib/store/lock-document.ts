import type { ChangeStream, ClientSession, Collection, Long } from 'mongodb';

/** A lock as stored: one document per key (see ARCHITECTURE.md §3). */
export interface LockDocument {
  /** The lock key. */
  _id: string;
  /** Random token of the current acquisition; `null` once released. */
  owner: string | null;
  /** Id of the `LockService` instance that holds (or last held) the key. */
  holder: string | null;
  /** Strictly increasing per key, never reset. */
  fence: Long;
  acquiredAt: Date | null;
  /** Server time at which the lease ends, whatever any client believes. */
  expiresAt: Date | null;
  /** Written by a transaction that proves, before committing, that the lock is still ours. */
  confirmedAt?: Date;
  /** The acquisition's owner scope (`releaseScope`), or null. */
  scope?: string | null;
  /** A semaphore's permits, while the key is used as one; null for a lock. */
  permits?: number | null;
  /** Shared holders or permit holders, each with its own lease, by a slot derived from its token. */
  holders?: Record<string, HolderEntry>;
  /**
   * Waiting processes' reservations (fairness, direct grants), each with its own short lease;
   * an exclusive waiter's names its process (`holder`), to which a release may grant the lock.
   */
  waiting?: Record<string, { weight: number; since: Date; expiresAt: Date; holder?: string }>;
  /** The reservation an unconfirmed direct grant went to (see `direct-grant.ts`), or null. */
  grantedTo?: string | null;
  /** That grant's process (holder id): its change stream asks for grants to it. */
  grantee?: string | null;
  /** Counts releases of holder entries: the change that tells waiters to look again. */
  frees?: number;
  /** Set on release; a TTL index deletes the idle document at this time. */
  gcAt: Date | null;
  /**
   * Recent releases of live leases, so a retried release knows it succeeded: a ring of
   * `RELEASED_OWNERS_KEPT` entries, the next one written at `releasedNext`. Entries written
   * by earlier versions have no `fence`.
   */
  releasedOwners?: { owner: string; fence?: Long; until: Date }[];
  releasedNext?: number;
  /** `holder` and `fence` of the last released acquisition, for release events. */
  releasedHolder?: string | null;
  releasedFence?: Long;
}

/** One shared holder or permit holder of a key. */
export interface HolderEntry {
  owner: string;
  holder: string;
  fence: Long;
  weight: number;
  acquiredAt: Date;
  expiresAt: Date;
  scope: string | null;
  /** Set by its release; the entry is dropped at the key's next grant. */
  releasedAt?: Date | null;
}

/**
 * The part of the driver's collection that the store uses. Narrow on purpose: tests and
 * readers see at a glance which commands the library can send.
 */
export type LockCollection = Pick<
  Collection<LockDocument>,
  | 'findOneAndUpdate'
  | 'findOne'
  | 'find'
  | 'updateOne'
  | 'updateMany'
  | 'createIndexes'
  | 'watch'
  | 'collectionName'
>;

/** Where the store starts the session that reports an attempt's `operationTime`. */
export interface SessionSource {
  startSession(options: { causalConsistency: boolean }): ClientSession;
}

/** A change stream over the lock collection, as the waiting layer consumes it. */
export type LockChangeStream = Pick<
  ChangeStream<LockDocument>,
  'tryNext' | 'close' | 'resumeToken' | 'closed'
>;
