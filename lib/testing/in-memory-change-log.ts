import type { Timestamp } from 'mongodb';
import type { LockDocument } from '../store/lock-document';

/** A write as the change log needs it; the log adds the cluster time, wall time and token. */
export type LockChangeDraft =
  | { operationType: 'insert'; key: string; fullDocument: LockDocument }
  | {
      operationType: 'update';
      key: string;
      /** Changed fields by path (`owner`, `releasedOwners.3`, `holders.h1f….releasedAt`). */
      updatedFields: Record<string, unknown>;
      /** Fields the write removed, by path (`waiting.r2c…`, a dropped holder entry). */
      removedFields?: string[];
    };

export type LoggedChange = LockChangeDraft & {
  /** Position in the log, from 1; the resume token encodes it. */
  seq: number;
  clusterTime: Timestamp;
  wallTime: Date;
};

/** How many changes the log keeps; a stream asked to start before them fails as on a server. */
export const CHANGE_LOG_KEPT = 10_000;

/**
 * Top-level fields of an update that some change stream of the library lets through
 * (`lock-change-stream.ts`): `owner` (exclusive acquisitions and releases), `frees` (releases of
 * holder entries, withdrawn reservations), `fence` (grants of holder entries).
 */
const STREAMED_FIELDS = ['owner', 'frees', 'fence'];

/**
 * The in-memory oplog: every change that a change stream of the lock collection can report
 * (acquisitions and releases; renewals, expiry changes and reservations touch neither `owner`,
 * `frees` nor `fence` and are left out, as no stream's filter lets them through). Streams read
 * it from their own position and are told when something is appended.
 */
export class InMemoryChangeLog {
  private readonly entries: LoggedChange[] = [];
  private lastSeq = 0;
  /** Cluster time of the newest change dropped to keep the log bounded. */
  private droppedUpTo: Timestamp | undefined;
  private readonly listeners = new Set<() => void>();

  constructor(private readonly kept = CHANGE_LOG_KEPT) {}

  /** Sequence number of the newest change (0 when none yet). */
  get newestSeq(): number {
    return this.lastSeq;
  }

  /** Sequence number of the oldest change still kept. */
  get oldestKeptSeq(): number {
    return this.entries[0]?.seq ?? this.lastSeq + 1;
  }

  append(draft: LockChangeDraft, clusterTime: Timestamp, wallTime: Date): void {
    if (
      draft.operationType === 'update' &&
      !STREAMED_FIELDS.some((field) => field in draft.updatedFields)
    ) {
      // Only a renewal, an expiry or a reservation: no change stream of the library reports it.
      return;
    }
    this.lastSeq += 1;
    this.entries.push({ ...draft, seq: this.lastSeq, clusterTime, wallTime });
    if (this.entries.length > this.kept) this.droppedUpTo = this.entries.shift()?.clusterTime;
    for (const listener of [...this.listeners]) listener();
  }

  /** The change with sequence number `seq`, if still kept. */
  at(seq: number): LoggedChange | undefined {
    const index = seq - this.oldestKeptSeq;
    return index >= 0 ? this.entries[index] : undefined;
  }

  /**
   * Where a stream starting at `time` begins: the first change at or after it. `undefined`
   * when changes at or after `time` may already have been dropped.
   */
  firstSeqAtOrAfter(time: Timestamp): number | undefined {
    if (this.droppedUpTo && time.compare(this.droppedUpTo) <= 0) return undefined;
    const found = this.entries.find((entry) => entry.clusterTime.compare(time) >= 0);
    return found?.seq ?? this.lastSeq + 1;
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
