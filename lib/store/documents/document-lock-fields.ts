/**
 * Paths of a document lock's fields under the lock field (default `_lock`): `path('owner')`
 * for filters and `$set`, `value('owner')` for aggregation expressions.
 */
export class DocumentLockFields {
  constructor(readonly field: string) {}

  path(name: string): string {
    return `${this.field}.${name}`;
  }

  value(name: string): string {
    return `$${this.field}.${name}`;
  }

  /** The whole lock sub-document, in expressions. */
  get whole(): string {
    return `$${this.field}`;
  }

  /** True while a live lease holds the document, by the server clock (or engine v2's line). */
  get held() {
    return {
      $or: [
        {
          $and: [
            { $ne: [{ $ifNull: [this.value('owner'), null] }, null] },
            { $gt: [this.value('expiresAt'), '$$NOW'] },
          ],
        },
        this.heldOnLine,
      ],
    };
  }

  /**
   * True while engine v2 keeps a live entry in the lock field's line (`document-line.ts`): an
   * instance of either engine on one collection, as in a rolling switch, never passes over it.
   */
  get heldOnLine() {
    const live = {
      $filter: {
        input: { $ifNull: [this.value('line'), []] },
        cond: { $gt: ['$$this.e', '$$NOW'] },
      },
    };
    return { $gt: [{ $size: live }, 0] };
  }

  /** Remaining lease in ms, by the server clock of the command. */
  get remainingMs() {
    return { $max: [0, { $subtract: [{ $ifNull: [this.value('expiresAt'), '$$NOW'] }, '$$NOW'] }] };
  }

  /** Filter: `owner` holds a live lease. */
  heldBy(owner: string): Record<string, unknown> {
    return { [this.path('owner')]: owner, $expr: { $gt: [this.value('expiresAt'), '$$NOW'] } };
  }

  /** The document without its lock field. */
  strip<T extends Record<string, unknown>>(document: T): T {
    const { [this.field]: _lock, ...rest } = document;
    return rest as T;
  }
}
