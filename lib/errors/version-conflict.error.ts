import { MongoLockError } from './mongo-lock.error';

/**
 * The document's version is no longer the one the caller read: someone else wrote it
 * meanwhile. Nothing was written. 409 over HTTP (412 when the version came from `If-Match`).
 *
 * @example
 * catch (error) {
 *   if (error instanceof VersionConflictError) reloadAndRetry(error.current);
 * }
 */
export class VersionConflictError extends MongoLockError {
  readonly id: unknown;
  /** The version the caller expected. */
  readonly expected: unknown;
  /** The version the document has now. */
  readonly current: unknown;

  constructor(message: string, details: { id: unknown; expected: unknown; current: unknown }) {
    super(message);
    this.id = details.id;
    this.expected = details.expected;
    this.current = details.current;
  }

  override get name(): string {
    return 'VersionConflictError';
  }
}
