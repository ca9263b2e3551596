import { type Document, Long } from 'bson';
import type { CommandContext } from './context';
import type { CommandError } from './errors';

export interface CursorBatch {
  documents: Document[];
  exhausted: boolean;
  /** Change streams only. */
  postBatchResumeToken?: Document;
}

/** A server-side cursor: find/aggregate results or a change stream. */
export interface ServerCursor {
  readonly id: number;
  readonly ns: string;
  lsid?: Document;
  nextBatch(context: CommandContext, batchSize: number | undefined): Promise<CursorBatch>;
  /** Wakes a change stream's waiting getMore so that it fails with `reason` (killCursors, step-down). */
  kill(reason?: CommandError): void;
}

export class CursorRegistry {
  private readonly cursors = new Map<number, ServerCursor>();

  newId(): number {
    // Positive and below 2^53 so that it survives promoteLongs on both sides.
    return Math.floor(Math.random() * 2 ** 52) + 1;
  }

  add(cursor: ServerCursor): void {
    this.cursors.set(cursor.id, cursor);
  }

  get(id: number): ServerCursor | undefined {
    return this.cursors.get(id);
  }

  remove(id: number, reason?: CommandError): boolean {
    const cursor = this.cursors.get(id);
    cursor?.kill(reason);
    return this.cursors.delete(id);
  }

  killAll(reason?: CommandError): void {
    for (const id of [...this.cursors.keys()]) this.remove(id, reason);
  }

  killForSessions(matches: (lsid: Document | undefined) => boolean): void {
    for (const [id, cursor] of this.cursors) if (matches(cursor.lsid)) this.remove(id);
  }
}

/** An already computed result set served batch by batch. */
export class ArrayCursor implements ServerCursor {
  private offset = 0;

  constructor(
    readonly id: number,
    readonly ns: string,
    private readonly documents: Document[],
    readonly lsid?: Document,
  ) {}

  async nextBatch(_context: CommandContext, batchSize: number | undefined): Promise<CursorBatch> {
    const end = batchSize && batchSize > 0 ? this.offset + batchSize : this.documents.length;
    const documents = this.documents.slice(this.offset, end);
    this.offset += documents.length;
    return { documents, exhausted: this.offset >= this.documents.length };
  }

  kill(): void {}
}

export function cursorReply(
  id: number,
  ns: string,
  batchField: 'firstBatch' | 'nextBatch',
  batch: CursorBatch,
): Document {
  const cursor: Document = {
    [batchField]: batch.documents,
    id: Long.fromNumber(batch.exhausted ? 0 : id),
    ns,
  };
  if (batch.postBatchResumeToken) cursor.postBatchResumeToken = batch.postBatchResumeToken;
  return { cursor, ok: 1 };
}
