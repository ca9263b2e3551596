/** What `LockService.inspect()` tells of a key. Never carries the owner token. */
export interface LockState {
  key: string;
  /** Whether a live (unexpired) lease holds the key now, by the server clock. */
  held: boolean;
  /** Id of the `LockService` instance holding it (the latest, if several); `null` when free. */
  holderId: string | null;
  /**
   * Fencing token of the latest holder's entry, in any mode; of the last acquisition when free.
   * An entry's first: a caller of the same process handed the entry over holds a later one.
   */
  fence: bigint;
  /** Milliseconds left by the server clock until the (last) lease ends; 0 when free. */
  remainingMs: number;
  /**
   * When the current (latest) holder joined the key's line, by the server clock: its grant, or
   * earlier if it waited in line; `null` when free.
   */
  acquiredAt: Date | null;
  /** When the lease ends (with several holders, the last one's); `null` when free. */
  expiresAt: Date | null;
  /** How the key is held now (`semaphore`: see `permits`); `null` when free. */
  mode: 'exclusive' | 'shared' | 'semaphore' | null;
  /** The semaphore's permits, when the key is held as one. */
  permits?: number;
  /** Every live holder, earliest grant first. */
  holders: LockHolderState[];
  /** Calls waiting in the key's line, not counting those queued behind their process's entry. */
  waiting: number;
}

/** One live holder of a key, as `inspect()` reports it. */
export interface LockHolderState {
  holderId: string | null;
  /** Its entry's first fence (see `LockState.fence`). */
  fence: bigint;
  /** Permits held (1 for an exclusive or shared holder). */
  weight: number;
  remainingMs: number;
  /** The acquisition's owner scope (`AcquireOptions.scope`), when it had one. */
  scope?: string;
}

/** An acquisition or release seen on the lock collection. */
export interface LockEvent {
  type: 'acquired' | 'released' | 'deleted';
  key: string;
  holderId: string | null;
  fence: bigint | null;
  /** Server time of the change (the change event's wall time when known). */
  at: Date;
}
