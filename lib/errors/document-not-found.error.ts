import { MongoLockError } from './mongo-lock.error';

/**
 * No document has the id (and no `createIfMissing`), or it does not meet the lock's `where`.
 * Thrown at once, without waiting. 404 over HTTP.
 *
 * @example
 * catch (error) { if (error instanceof DocumentNotFoundError) return null; }
 */
export class DocumentNotFoundError extends MongoLockError {
  /** The `_id` that was asked for. */
  readonly id: unknown;

  constructor(message: string, details: { id: unknown; cause?: unknown }) {
    super(message, details);
    this.id = details.id;
  }

  override get name(): string {
    return 'DocumentNotFoundError';
  }
}
