import { EventEmitter } from 'node:events';
import type { Document, Timestamp } from 'bson';

export type OplogOp =
  | 'insert'
  | 'update'
  | 'replace'
  | 'delete'
  | 'drop'
  | 'rename'
  | 'dropDatabase'
  | 'create'
  | 'createIndexes'
  | 'dropIndexes';

/** One committed change, in the order it happened. Change streams are views over these. */
export interface OplogEntry {
  ts: Timestamp;
  wallTime: Date;
  op: OplogOp;
  db: string;
  coll?: string;
  documentKey?: Document;
  /** Post-image for insert and replace; also kept for update (used by updateLookup fallback). */
  fullDocument?: Document;
  updateDescription?: Document;
  /** Pre-image for update, replace and delete (fullDocumentBeforeChange). */
  preImage?: Document;
  /** The collection had changeStreamPreAndPostImages enabled when this was written. */
  imagesEnabled?: boolean;
  /** The collection's UUID (expanded change events report it). */
  collectionUUID?: unknown;
  /** DDL entries: what `showExpandedEvents` streams report as `operationDescription`. */
  operationDescription?: Document;
  /** rename: the target namespace. */
  to?: { db: string; coll: string };
  lsid?: Document;
  txnNumber?: number;
  /** Written by a committed transaction: change events then carry lsid and txnNumber. */
  inTransaction?: boolean;
}

/**
 * The in-memory oplog. Bounded so that a long benchmark does not grow without limit; a change
 * stream resuming from before the oldest kept entry gets ChangeStreamHistoryLost as on MongoDB.
 */
export class Oplog extends EventEmitter {
  readonly entries: OplogEntry[] = [];
  /** Absolute position of entries[0] since start. */
  firstPosition = 0;

  constructor(private readonly capacity = 200_000) {
    super();
    this.setMaxListeners(0);
  }

  append(entry: OplogEntry): void {
    this.entries.push(entry);
    if (this.entries.length > this.capacity) {
      const drop = Math.floor(this.capacity / 10);
      this.entries.splice(0, drop);
      this.firstPosition += drop;
    }
    this.emit('entry', entry);
  }

  get endPosition(): number {
    return this.firstPosition + this.entries.length;
  }

  at(position: number): OplogEntry | undefined {
    return this.entries[position - this.firstPosition];
  }

  /** Position of the first entry with ts >= the given time (binary search: entries are ordered). */
  positionAtOrAfter(ts: Timestamp): number {
    let low = 0;
    let high = this.entries.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.entries[middle].ts.compare(ts) < 0) low = middle + 1;
      else high = middle;
    }
    return this.firstPosition + low;
  }
}
