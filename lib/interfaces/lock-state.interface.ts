/** What `LockService.inspect()` tells of a key. Never carries the owner token. */
export interface LockState {
  key: string;
  /** Whether a live (unexpired) lease holds the key now, by the server clock. */
  held: boolean;
  /** Id of the `LockService` instance that holds (or last held) it. */
  holderId: string | null;
  /** Fencing token of the latest acquisition. */
  fence: bigint;
  /** Milliseconds left on the lease by the server clock; 0 when free. */
  remainingMs: number;
  acquiredAt: Date | null;
  expiresAt: Date | null;
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
