import { type Document, UUID } from 'bson';
import { Query } from 'mingo/query';
import { CommandError } from '../commands/errors';
import { canonicalKey } from './bson-values';
import { DuplicateKeyError } from './duplicate-key-error';
import { type IndexSpec, indexKeysOf } from './index-keys';
import { MINGO_OPTIONS } from './mingo-options';

interface UniqueIndex {
  spec: IndexSpec;
  partial?: Query;
  /** canonical index key -> canonical _id of the owning document */
  owners: Map<string, string>;
}

export const ID_INDEX: IndexSpec = { v: 2, key: { _id: 1 }, name: '_id_' };

/**
 * Documents of one collection in natural (insertion) order, keyed by the canonical form of
 * their `_id` so that `{_id: x}` lookups never scan, plus the unique indexes' key maps.
 */
export class Collection {
  readonly documents = new Map<string, Document>();
  readonly indexes: IndexSpec[] = [ID_INDEX];
  private readonly uniqueIndexes: UniqueIndex[] = [];

  constructor(
    readonly db: string,
    public name: string,
    readonly options: Document = {},
    readonly uuid: UUID = new UUID(),
  ) {}

  /**
   * A private copy for a transaction: stored documents are never mutated in place (updates
   * write new objects), so copying the maps is enough.
   */
  clone(): Collection {
    const copy = new Collection(this.db, this.name, this.options, this.uuid);
    for (const [key, document] of this.documents) copy.documents.set(key, document);
    copy.indexes.splice(0, copy.indexes.length, ...this.indexes);
    for (const index of this.uniqueIndexes)
      copy.uniqueIndexes.push({ ...index, owners: new Map(index.owners) });
    return copy;
  }

  get ns(): string {
    return `${this.db}.${this.name}`;
  }

  getById(id: unknown): Document | undefined {
    return this.documents.get(canonicalKey(id));
  }

  /** Throws DuplicateKeyError if `document` would violate a unique index. */
  checkUnique(document: Document, replacing: boolean): void {
    const idKey = canonicalKey(document._id);
    if (!replacing && this.documents.has(idKey)) {
      throw new DuplicateKeyError(this.ns, '_id_', { _id: 1 }, { _id: document._id });
    }
    for (const index of this.uniqueIndexes) {
      for (const key of indexKeysOf(index.spec, document, index.partial)) {
        const owner = index.owners.get(key.canonical);
        if (owner !== undefined && owner !== idKey) {
          throw new DuplicateKeyError(this.ns, index.spec.name, index.spec.key, key.keyValue);
        }
      }
    }
  }

  insert(document: Document): void {
    this.checkUnique(document, false);
    this.documents.set(canonicalKey(document._id), document);
    this.addKeys(document);
  }

  /** `newDocument` has the same `_id` as `oldDocument` (updates cannot change it). */
  replace(oldDocument: Document, newDocument: Document): void {
    this.checkUnique(newDocument, true);
    this.removeKeys(oldDocument);
    this.documents.set(canonicalKey(newDocument._id), newDocument);
    this.addKeys(newDocument);
  }

  remove(document: Document): void {
    this.removeKeys(document);
    this.documents.delete(canonicalKey(document._id));
  }

  addIndex(spec: IndexSpec): void {
    const partial = spec.partialFilterExpression
      ? new Query(spec.partialFilterExpression, MINGO_OPTIONS)
      : undefined;
    if (spec.unique && spec.name !== '_id_') {
      const index: UniqueIndex = { spec, partial, owners: new Map() };
      for (const [idKey, document] of this.documents) {
        for (const key of indexKeysOf(spec, document, partial)) {
          const owner = index.owners.get(key.canonical);
          if (owner !== undefined && owner !== idKey) {
            const error = new DuplicateKeyError(this.ns, spec.name, spec.key, key.keyValue);
            throw new CommandError(11000, `Index build failed: ${error.message}`, error.extra);
          }
          index.owners.set(key.canonical, idKey);
        }
      }
      this.uniqueIndexes.push(index);
    }
    this.indexes.push(spec);
  }

  dropIndex(name: string): void {
    const position = this.indexes.findIndex((index) => index.name === name);
    if (position >= 0) this.indexes.splice(position, 1);
    const unique = this.uniqueIndexes.findIndex((index) => index.spec.name === name);
    if (unique >= 0) this.uniqueIndexes.splice(unique, 1);
  }

  private addKeys(document: Document): void {
    const idKey = canonicalKey(document._id);
    for (const index of this.uniqueIndexes) {
      for (const key of indexKeysOf(index.spec, document, index.partial)) {
        index.owners.set(key.canonical, idKey);
      }
    }
  }

  private removeKeys(document: Document): void {
    const idKey = canonicalKey(document._id);
    for (const index of this.uniqueIndexes) {
      for (const key of indexKeysOf(index.spec, document, index.partial)) {
        if (index.owners.get(key.canonical) === idKey) index.owners.delete(key.canonical);
      }
    }
  }
}
