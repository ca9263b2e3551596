import type { Document } from 'bson';
import type { Collection } from './collection';
import type { WriteOrigin } from './storage';

/**
 * What commands read and write through: the real storage, or a transaction's private view
 * of it that is applied on commit.
 */
export interface DataStore {
  readonly databases: Map<string, Map<string, Collection>>;
  getCollection(db: string, name: string): Collection | undefined;
  ensureCollection(db: string, name: string, options?: Document): Collection;
  insert(collection: Collection, document: Document, origin?: WriteOrigin): void;
  update(
    collection: Collection,
    before: Document,
    after: Document,
    replacement: boolean,
    origin?: WriteOrigin,
    /** The operator update that produced `after`, for a MongoDB-grained updateDescription. */
    modifier?: Document,
  ): void;
  delete(collection: Collection, document: Document, origin?: WriteOrigin): void;
  /**
   * The real storage only: throws `DocumentBusy` before a plain write to several documents
   * when one of them is written by an open transaction (a transaction's own writes conflict
   * instead).
   */
  assertUnlocked?(collection: Collection, ids: Iterable<unknown>, origin?: WriteOrigin): void;
  /** Index creation goes through the store so that a transaction can defer it. */
  addIndex(collection: Collection, spec: import('./index-keys').IndexSpec): void;
  dropIndex(collection: Collection, name: string): void;
  dropCollection(db: string, name: string): boolean;
  dropDatabase(db: string): void;
  renameCollection(from: Collection, toDb: string, toName: string, dropTarget: boolean): void;
}
