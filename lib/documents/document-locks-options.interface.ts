import type { Document, Filter } from 'mongodb';
import type { AcquireOptions } from '../interfaces/lock-options.interface';
import type { DocumentVersionType } from '../store/documents/document-version';

/** How one collection's documents are locked and versioned (`LockService.documents()`). */
export interface DocumentLocksOptions<T extends Document = Document> {
  /** Database of the collection. Default: the module's database. */
  dbName?: string;
  /** The field that holds the lock in each document. Default `'_lock'`; no `$` or `.`. */
  lockField?: string;
  /**
   * The document's version field, bumped by every `update`, `commit` and `updateIfCurrent`:
   * `int` (+1, the default), `decimal128` (+1) or `date` (the server's time, strictly later
   * than the stored one). Required by `updateIfCurrent`.
   */
  version?: { field: string; type?: DocumentVersionType };
  /**
   * The BSON type of `_id`: ids given as strings (from a route's parameters, say) are
   * converted (`objectId`: 24 hex digits; `number`: an integer), and ids of another type are
   * refused. Default: ids are used as given.
   */
  idType?: 'string' | 'objectId' | 'number';
  /** Only for typing `where`. */
  readonly __documentType?: T;
}

/** Options of one document-lock acquisition. */
export interface DocumentLockOptions<T extends Document = Document> extends AcquireOptions {
  /** Extra conditions the document must meet (a tenant, say); not met = `DocumentNotFoundError`, at once. */
  where?: Filter<T>;
  /**
   * Insert the document with these fields when no document has the id, then lock it, in the
   * same round trip. A version field that is not given starts at 0 (the epoch for dates).
   */
  createIfMissing?: Partial<T>;
}
