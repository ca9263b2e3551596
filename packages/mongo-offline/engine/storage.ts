import type { Document } from 'bson';
import { CommandError } from '../commands/errors';
import { Collection } from './collection';
import { LogicalClock } from './logical-clock';
import { Oplog, type OplogEntry } from './oplog';
import { describePipelineUpdate } from './update-delta';
import { describeOperatorUpdate } from './operator-update-description';
import type { DataStore } from './data-store';
import type { IndexSpec } from './index-keys';
import { canonicalKey } from './bson-values';
import { DocumentBusy } from './document-busy';

/** Who wrote: recorded in the oplog so that retried writes and transactions can be traced. */
export interface WriteOrigin {
  lsid?: Document;
  txnNumber?: number;
  inTransaction?: boolean;
}

/** An open transaction's hold on the documents it wrote: `ended` settles at its commit or abort. */
export interface TransactionHold {
  readonly ended: Promise<void>;
}

/**
 * All databases and collections, the cluster clock and the oplog. Every mutation goes
 * through here so that each one gets exactly one oplog entry with its own cluster time.
 */
export class Storage implements DataStore {
  readonly databases = new Map<string, Map<string, Collection>>();
  /** `<ns>|<canonical _id>` -> the open transaction that wrote that document. */
  readonly transactionLocks = new Map<string, TransactionHold>();
  readonly clock = new LogicalClock();
  /** Where this server's history begins: a restart keeps no oplog from before. */
  readonly historyStart = this.clock.now();
  readonly oplog = new Oplog();

  getCollection(db: string, name: string): Collection | undefined {
    return this.databases.get(db)?.get(name);
  }

  /** Implicit creation on first write, as MongoDB does. */
  ensureCollection(db: string, name: string, options: Document = {}): Collection {
    const existing = this.getCollection(db, name);
    if (existing) return existing;
    validateCollectionName(db, name);
    let collections = this.databases.get(db);
    if (!collections) {
      collections = new Map();
      this.databases.set(db, collections);
    }
    const collection = new Collection(db, name, options);
    collections.set(name, collection);
    const { viewOn, pipeline } = options;
    const operationDescription: Document =
      typeof viewOn === 'string'
        ? { viewOn, pipeline }
        : { idIndex: { v: 2, key: { _id: 1 }, name: '_id_' } };
    this.record({ op: 'create', db, coll: name, operationDescription });
    return collection;
  }

  private record(entry: Omit<OplogEntry, 'ts' | 'wallTime'>): OplogEntry {
    const collection = entry.coll ? this.getCollection(entry.db, entry.coll) : undefined;
    const images = collection?.options.changeStreamPreAndPostImages as Document | undefined;
    const full: OplogEntry = {
      collectionUUID: collection?.uuid,
      imagesEnabled: images?.enabled === true,
      ...entry,
      ts: this.clock.tick(),
      wallTime: new Date(),
    };
    this.oplog.append(full);
    return full;
  }

  /**
   * Throws {@link DocumentBusy} when a write outside a transaction to one of `ids` must first
   * wait for an open transaction that wrote it. Every write checks its own document; a
   * statement that writes several checks them all before its first write.
   */
  assertUnlocked(collection: Collection, ids: Iterable<unknown>, origin: WriteOrigin = {}): void {
    if (origin.inTransaction || this.transactionLocks.size === 0) return;
    for (const id of ids) {
      const hold = this.transactionLocks.get(lockKey(collection.ns, id));
      if (hold) throw new DocumentBusy(hold.ended);
    }
  }

  addIndex(collection: Collection, spec: IndexSpec): void {
    collection.addIndex(spec);
    this.record({
      op: 'createIndexes',
      db: collection.db,
      coll: collection.name,
      operationDescription: { indexes: [{ ...spec }] },
    });
  }

  insert(collection: Collection, document: Document, origin: WriteOrigin = {}): void {
    this.assertUnlocked(collection, [document._id], origin);
    collection.insert(document);
    this.record({
      op: 'insert',
      db: collection.db,
      coll: collection.name,
      documentKey: { _id: document._id },
      fullDocument: document,
      ...origin,
    });
  }

  /** Writes `after` over `before`; `replacement` picks the event type change streams see. */
  update(
    collection: Collection,
    before: Document,
    after: Document,
    replacement: boolean,
    origin: WriteOrigin = {},
    modifier?: Document,
  ): void {
    this.assertUnlocked(collection, [after._id], origin);
    collection.replace(before, after);
    // A pipeline update whose delta is not the smaller is logged whole: a `replace` event.
    const updateDescription = replacement
      ? undefined
      : modifier
        ? describeOperatorUpdate(before, after, modifier)
        : describePipelineUpdate(before, after);
    this.record({
      op: updateDescription ? 'update' : 'replace',
      db: collection.db,
      coll: collection.name,
      documentKey: { _id: after._id },
      fullDocument: after,
      preImage: before,
      updateDescription,
      ...origin,
    });
  }

  dropIndex(collection: Collection, name: string): void {
    const spec = collection.indexes.find((index) => index.name === name);
    collection.dropIndex(name);
    if (spec)
      this.record({
        op: 'dropIndexes',
        db: collection.db,
        coll: collection.name,
        operationDescription: { indexes: [{ ...spec }] },
      });
  }

  delete(collection: Collection, document: Document, origin: WriteOrigin = {}): void {
    this.assertUnlocked(collection, [document._id], origin);
    collection.remove(document);
    this.record({
      op: 'delete',
      db: collection.db,
      coll: collection.name,
      documentKey: { _id: document._id },
      preImage: document,
      ...origin,
    });
  }

  dropCollection(db: string, name: string): boolean {
    const collections = this.databases.get(db);
    if (!collections?.has(name)) return false;
    collections.delete(name);
    if (collections.size === 0) this.databases.delete(db);
    this.record({ op: 'drop', db, coll: name });
    return true;
  }

  dropDatabase(db: string): void {
    const collections = this.databases.get(db);
    if (!collections) return;
    for (const name of [...collections.keys()]) this.dropCollection(db, name);
    this.record({ op: 'dropDatabase', db });
  }

  renameCollection(from: Collection, toDb: string, toName: string, dropTarget: boolean): void {
    const target = this.getCollection(toDb, toName);
    const operationDescription: Document = { to: { db: toDb, coll: toName } };
    if (target) {
      if (!dropTarget) throw new CommandError(48, 'target namespace exists');
      operationDescription.dropTarget = target.uuid;
      this.dropCollection(toDb, toName);
    }
    this.databases.get(from.db)?.delete(from.name);
    if (this.databases.get(from.db)?.size === 0) this.databases.delete(from.db);
    let collections = this.databases.get(toDb);
    if (!collections) {
      collections = new Map();
      this.databases.set(toDb, collections);
    }
    // A rename keeps the collection's UUID.
    const moved = new Collection(toDb, toName, from.options, from.uuid);
    for (const spec of from.indexes.slice(1)) moved.addIndex(spec);
    for (const document of from.documents.values()) moved.insert(document);
    collections.set(toName, moved);
    this.record({
      op: 'rename',
      db: from.db,
      coll: from.name,
      to: { db: toDb, coll: toName },
      collectionUUID: from.uuid,
      operationDescription,
    });
  }
}

export function validateCollectionName(db: string, name: string): void {
  if (!name || name.includes('$') || name.includes('\0') || name.startsWith('.')) {
    throw new CommandError(73, `Invalid collection name: ${name}`);
  }
  if (!db || /[/\\. "$\0]/.test(db)) throw new CommandError(73, `Invalid database name: '${db}'`);
}

export function lockKey(ns: string, id: unknown): string {
  return `${ns}|${canonicalKey(id)}`;
}
