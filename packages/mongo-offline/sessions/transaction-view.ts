import type { Document } from 'bson';
import { CommandError } from '../commands/errors';
import { canonicalKey } from '../engine/bson-values';
import { Collection } from '../engine/collection';
import type { DataStore } from '../engine/data-store';
import type { IndexSpec } from '../engine/index-keys';
import {
  type Storage,
  type TransactionHold,
  type WriteOrigin,
  lockKey,
  validateCollectionName,
} from '../engine/storage';

type LoggedWrite =
  | { op: 'create'; db: string; coll: string; options: Document }
  | { op: 'createIndex'; db: string; coll: string; spec: IndexSpec }
  | { op: 'insert'; db: string; coll: string; document: Document }
  | {
      op: 'update';
      db: string;
      coll: string;
      after: Document;
      replacement: boolean;
      modifier?: Document;
    }
  | { op: 'delete'; db: string; coll: string; id: unknown };

export function writeConflict(): CommandError {
  return new CommandError(
    112,
    'Write conflict during plan execution and yielding is disabled. :: Please retry your write',
    {
      errorLabels: ['TransientTransactionError'],
    },
  );
}

function notInTransaction(command: string): CommandError {
  return new CommandError(263, `Cannot run '${command}' in a multi-document transaction.`);
}

/**
 * A transaction's private copy-on-first-touch view of the storage. Writes go to cloned
 * collections (read-your-own-writes) and to a log that commit replays onto the real storage;
 * nothing is visible outside before that. Documents it writes are locked: another
 * transaction touching them gets WriteConflict, and a plain write waits until this one ends.
 */
export class TransactionView implements DataStore, TransactionHold {
  readonly databases = new Map<string, Map<string, Collection>>();
  private readonly clones = new Map<string, Collection>();
  private readonly log: LoggedWrite[] = [];
  private readonly locked = new Set<string>();
  private endTransaction!: () => void;
  /** Settles when the transaction commits or aborts: plain writes of its documents wait for it. */
  readonly ended = new Promise<void>((resolve) => (this.endTransaction = resolve));

  /** Oplog position when the transaction started: its snapshot. */
  private readonly snapshotPosition: number;

  constructor(
    private readonly base: Storage,
    private readonly origin: WriteOrigin,
  ) {
    this.snapshotPosition = base.oplog.endPosition;
  }

  getCollection(db: string, name: string): Collection | undefined {
    const ns = `${db}.${name}`;
    const cloned = this.clones.get(ns);
    if (cloned) return cloned;
    const original = this.base.getCollection(db, name);
    if (!original) return undefined;
    const copy = original.clone();
    this.rewindToSnapshot(copy);
    this.clones.set(ns, copy);
    return copy;
  }

  ensureCollection(db: string, name: string, options: Document = {}): Collection {
    const existing = this.getCollection(db, name);
    if (existing) return existing;
    validateCollectionName(db, name);
    const created = new Collection(db, name, options);
    this.clones.set(created.ns, created);
    this.log.push({ op: 'create', db, coll: name, options });
    return created;
  }

  /**
   * Undoes, on the copy, the writes made to its collection since the transaction started,
   * newest first, from the oplog's pre-images: the transaction reads one point in time
   * however late it first touches a collection.
   */
  private rewindToSnapshot(copy: Collection): void {
    const { oplog } = this.base;
    if (this.snapshotPosition < oplog.firstPosition) return; // history gone: read the present
    for (let position = oplog.endPosition - 1; position >= this.snapshotPosition; position--) {
      const entry = oplog.at(position);
      if (!entry || entry.db !== copy.db || entry.coll !== copy.name) continue;
      const current = entry.documentKey ? copy.getById(entry.documentKey._id) : undefined;
      if (entry.op === 'insert' && current) copy.remove(current);
      else if ((entry.op === 'update' || entry.op === 'replace') && current && entry.preImage)
        copy.replace(current, entry.preImage);
      else if (entry.op === 'delete' && !current && entry.preImage) copy.insert(entry.preImage);
    }
  }

  private lock(collection: Collection, id: unknown): void {
    const key = lockKey(collection.ns, id);
    if (this.locked.has(key)) return;
    if (this.base.transactionLocks.has(key)) throw writeConflict();
    // Changed outside since this transaction first read the collection: MongoDB's snapshot
    // isolation reports that as a write conflict too.
    const current = this.base
      .getCollection(collection.db, collection.name)
      ?.documents.get(canonicalKey(id));
    if (current !== collection.documents.get(canonicalKey(id))) throw writeConflict();
    this.base.transactionLocks.set(key, this);
    this.locked.add(key);
  }

  insert(collection: Collection, document: Document): void {
    this.lock(collection, document._id);
    collection.insert(document);
    this.log.push({ op: 'insert', db: collection.db, coll: collection.name, document });
  }

  update(
    collection: Collection,
    before: Document,
    after: Document,
    replacement: boolean,
    _origin?: WriteOrigin,
    modifier?: Document,
  ): void {
    this.lock(collection, after._id);
    collection.replace(before, after);
    this.log.push({
      op: 'update',
      db: collection.db,
      coll: collection.name,
      after,
      replacement,
      modifier,
    });
  }

  delete(collection: Collection, document: Document): void {
    this.lock(collection, document._id);
    collection.remove(document);
    this.log.push({ op: 'delete', db: collection.db, coll: collection.name, id: document._id });
  }

  addIndex(collection: Collection, spec: IndexSpec): void {
    collection.addIndex(spec);
    this.log.push({ op: 'createIndex', db: collection.db, coll: collection.name, spec });
  }

  dropIndex(): void {
    throw notInTransaction('dropIndexes');
  }

  dropCollection(): boolean {
    throw notInTransaction('drop');
  }

  dropDatabase(): void {
    throw notInTransaction('dropDatabase');
  }

  renameCollection(): void {
    throw notInTransaction('renameCollection');
  }

  /**
   * Replays the log onto the real storage; each write gets its own oplog entry. The documents
   * are released even if a write fails partway.
   */
  commit(): void {
    try {
      this.replay();
    } finally {
      this.release();
    }
  }

  private replay(): void {
    const origin: WriteOrigin = { ...this.origin, inTransaction: true };
    for (const write of this.log) {
      if (write.op === 'create') {
        this.base.ensureCollection(write.db, write.coll, write.options);
        continue;
      }
      const collection = this.base.ensureCollection(write.db, write.coll);
      if (write.op === 'createIndex') {
        if (!collection.indexes.some((spec) => spec.name === write.spec.name)) {
          this.base.addIndex(collection, write.spec);
        }
      } else if (write.op === 'insert') {
        this.base.insert(collection, write.document, origin);
      } else if (write.op === 'update') {
        const current = collection.getById(write.after._id);
        if (current)
          this.base.update(
            collection,
            current,
            write.after,
            write.replacement,
            origin,
            write.modifier,
          );
      } else {
        const current = collection.getById(write.id);
        if (current) this.base.delete(collection, current, origin);
      }
    }
  }

  release(): void {
    for (const key of this.locked) {
      if (this.base.transactionLocks.get(key) === this) this.base.transactionLocks.delete(key);
    }
    this.locked.clear();
    this.endTransaction();
  }
}
