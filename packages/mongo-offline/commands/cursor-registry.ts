import { BSON, type Document, Long } from 'bson';

const DEFAULT_FIRST_BATCH = 101;
/** Leaves room for the reply envelope under the 16 MiB BSON limit. */
const MAX_BATCH_BYTES = 16 * 1024 * 1024 - 64 * 1024;
const CURSOR_IDLE_TIMEOUT_MS = 10 * 60 * 1000;
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
  private readonly lastUsed = new Map<number, number>();

  newId(): number {
    // Positive and below 2^53 so that it survives promoteLongs on both sides.
    return Math.floor(Math.random() * 2 ** 52) + 1;
  }

  add(cursor: ServerCursor): void {
    this.cursors.set(cursor.id, cursor);
    this.lastUsed.set(cursor.id, Date.now());
  }

  get(id: number): ServerCursor | undefined {
    if (this.cursors.has(id)) this.lastUsed.set(id, Date.now());
    return this.cursors.get(id);
  }

  get size(): number {
    return this.cursors.size;
  }

  /** MongoDB's cursorTimeoutMillis: a cursor unused for ten minutes is closed. */
  reapIdle(now = Date.now()): void {
    for (const [id, used] of this.lastUsed)
      if (now - used > CURSOR_IDLE_TIMEOUT_MS) this.remove(id);
  }

  remove(id: number, reason?: CommandError): boolean {
    const cursor = this.cursors.get(id);
    cursor?.kill(reason);
    this.lastUsed.delete(id);
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

  /**
   * MongoDB's batching: a first batch of 101 documents unless asked otherwise, and no batch
   * over ~16 MB, so a large result never makes a reply the driver cannot read.
   */
  async nextBatch(_context: CommandContext, batchSize: number | undefined): Promise<CursorBatch> {
    const first = this.offset === 0;
    const wanted = batchSize && batchSize > 0 ? batchSize : first ? DEFAULT_FIRST_BATCH : Infinity;
    const documents: Document[] = [];
    let bytes = 0;
    while (this.offset < this.documents.length && documents.length < wanted) {
      const document = this.documents[this.offset];
      bytes += BSON.calculateObjectSize(document);
      if (documents.length > 0 && bytes > MAX_BATCH_BYTES) break;
      documents.push(document);
      this.offset += 1;
    }
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
