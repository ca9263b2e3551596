/**
 * Base class of every error this library throws, so callers can tell lock failures from
 * anything else with one `instanceof`.
 *
 * @example
 * catch (error) {
 *   if (error instanceof MongoLockError) logger.warn(error.message);
 *   else throw error;
 * }
 */
export class MongoLockError extends Error {
  /** No `cause` property unless a cause is given. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
  }

  // A getter survives minification and subclassing, unlike an assigned `this.name`.
  override get name(): string {
    return 'MongoLockError';
  }
}
