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
   * The version field, bumped by every `update`, `commit` and `updateIfCurrent` (which requires
   * it): `int` (+1, default), `decimal128` (+1) or `date` (server time, strictly later).
   */
  version?: { field: string; type?: DocumentVersionType };
  /**
   * The BSON type of `_id`: string ids (route parameters, say) are converted (`objectId`: 24 hex
   * digits; `number`: an integer), other types refused. Default: ids are used as given.
   */
  idType?: 'string' | 'objectId' | 'number';
  /** Only for typing `where`. */
  readonly __documentType?: T;
}

/** Options of one document-lock acquisition. */
export interface DocumentLockOptions<T extends Document = Document> extends AcquireOptions {
  /** Conditions the document must meet (a tenant, say); else at once `DocumentNotFoundError`. */
  where?: Filter<T>;
  /**
   * Fields to insert the document with if none has the id, locked in the same round trip. An
   * absent version field starts at 0 (the epoch for dates).
   */
  createIfMissing?: Partial<T>;
}
