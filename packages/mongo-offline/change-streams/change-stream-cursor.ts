import type { Document } from 'bson';
import { Aggregator } from 'mingo/aggregator';
import { Query } from 'mingo/query';
import type { CommandContext } from '../commands/context';
import type { CursorBatch, ServerCursor } from '../commands/cursor-registry';
import { CommandError, badValue } from '../commands/errors';
import { canonicalKey } from '../engine/bson-values';
import { MINGO_OPTIONS } from '../engine/mingo-options';
import type { OplogEntry } from '../engine/oplog';
import type { Storage } from '../engine/storage';
import { type StreamScope, eventsForEntry } from './change-events';
import { compileEventFilter } from './event-filter';
import { type ResumePoint, highWaterMark, isAfter } from './resume-token';

export interface ChangeStreamSettings {
  scope: StreamScope;
  /** Absolute oplog position to read from. */
  position: number;
  /** Events at or before this point are skipped (resume tokens, startAtOperationTime). */
  resumePoint?: ResumePoint;
  /** postBatchResumeToken before any event has been seen. */
  initialToken: Document;
  fullDocument: string;
  fullDocumentBeforeChange: string;
  showExpandedEvents: boolean;
  userStages: Document[];
}

const DEFAULT_AWAIT_MS = 1000;
const MAX_BATCH = 1000;

/**
 * A pre- or post-image kept with the write: only for collections with
 * `changeStreamPreAndPostImages` enabled at the time, as on MongoDB; `required` fails without.
 */
function storedImage(
  entry: OplogEntry,
  image: Document | undefined,
  mode: string,
  kind: 'pre' | 'post',
): Document | null {
  if (entry.imagesEnabled && image) return image;
  if (mode === 'required') {
    throw new CommandError(
      47,
      `Change stream was configured to require a ${kind}-image for all update, delete and replace events, but the ${kind}-image was not found`,
      { errorLabels: ['NonResumableChangeStreamError'] },
    );
  }
  return null;
}

/** How many events a change stream's `$match` left to mingo's Query (for tests). */
export const filterStats = { byQuery: 0 };

/** One user stage after `$changeStream`, prepared once per cursor and run on every event. */
type UserStage = (events: Document[]) => Document[];

/** A regular expression whose `test` depends on the previous call (`lastIndex`): g and y. */
function hasStatefulRegExp(value: unknown): boolean {
  if (value instanceof RegExp) return value.global || value.sticky;
  if (!value || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(hasStatefulRegExp);
  if ('_bsontype' in value || value instanceof Date) return false;
  return Object.entries(value as Document).some(
    ([key, item]) =>
      (key === '$options' && typeof item === 'string' && /[gy]/.test(item)) ||
      hasStatefulRegExp(item),
  );
}

/**
 * The user stages of one cursor. mingo's `$match` compiles its Query every time the pipeline
 * runs, i.e. for every event on every cursor; here it is compiled once, at the cursor's first
 * event (so that a bad filter still fails when the first event arrives, as before) and then
 * reused: a compiled Query keeps no state between documents. Filters that watch for kinds of
 * change are decided in plain JavaScript where they can be (event-filter.ts), by the Query
 * where they cannot. A `$match` with a `g` or `y`
 * regular expression (stateful `lastIndex`) is still compiled per event. Other stages run
 * through mingo as they did, one Aggregator per stage built once.
 */
function prepareUserStages(stages: Document[]): UserStage[] {
  return stages.map((stage) => {
    const keys = Object.keys(stage ?? {});
    if (keys.length === 1 && keys[0] === '$match' && !hasStatefulRegExp(stage.$match)) {
      const condition = stage.$match as Document;
      const fast = compileEventFilter(condition);
      let query: Query | undefined;
      return (events) => {
        query ??= new Query(condition, MINGO_OPTIONS);
        const compiled = query;
        return events.filter((event) => {
          const decided = fast?.(event);
          if (decided !== undefined) return decided;
          filterStats.byQuery += 1;
          return compiled.test(event);
        });
      };
    }
    const aggregator = new Aggregator([stage], MINGO_OPTIONS);
    return (events) => aggregator.run<Document>(events);
  });
}

/** A change stream: a tailing view over the oplog that waits for new entries in getMore. */
export class ChangeStreamCursor implements ServerCursor {
  private position: number;
  private readonly pending: Document[] = [];
  private invalidated = false;
  private killed: CommandError | undefined;
  private lastToken: Document;
  private wake: (() => void) | undefined;
  private readonly userStages: UserStage[];

  constructor(
    readonly id: number,
    readonly ns: string,
    private readonly storage: Storage,
    private readonly settings: ChangeStreamSettings,
    readonly lsid?: Document,
  ) {
    this.position = settings.position;
    this.lastToken = settings.initialToken;
    this.userStages = prepareUserStages(settings.userStages);
  }

  kill(error?: CommandError): void {
    this.killed = error ?? new CommandError(237, 'cursor killed');
    this.wake?.();
  }

  async nextBatch(context: CommandContext, batchSize: number | undefined): Promise<CursorBatch> {
    const limit = batchSize && batchSize > 0 ? batchSize : MAX_BATCH;
    const awaiting = context.name.toLowerCase() === 'getmore';
    this.collect(limit);
    if (this.pending.length === 0 && awaiting && !this.invalidated && limit > 0) {
      const maxTimeMS = Number(context.command.maxTimeMS ?? DEFAULT_AWAIT_MS);
      await this.waitForEntries(maxTimeMS);
    }
    if (this.killed) throw this.killed;
    const documents = this.pending.splice(0, limit);
    if (documents.length > 0) this.lastToken = documents[documents.length - 1]._id as Document;
    const caughtUp = this.pending.length === 0 && this.position >= this.storage.oplog.endPosition;
    const postBatchResumeToken =
      caughtUp && !this.invalidated ? this.highWaterMark() : this.lastToken;
    return {
      documents,
      exhausted: this.invalidated && this.pending.length === 0,
      postBatchResumeToken,
    };
  }

  /** A token at the current cluster time, never behind the last event handed out. */
  private highWaterMark(): Document {
    const now = highWaterMark(this.storage.clock.now());
    return String(now._data) > String(this.lastToken._data) ? now : this.lastToken;
  }

  private async waitForEntries(maxTimeMS: number): Promise<void> {
    const deadline = Date.now() + maxTimeMS;
    while (this.pending.length === 0 && !this.invalidated && !this.killed) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) return;
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          this.storage.oplog.off('entry', done);
          this.wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, remaining);
        this.storage.oplog.on('entry', done);
        this.wake = done;
      });
      // Read at once, as mongod wakes an awaiting getMore when the entry becomes visible: this
      // runs after the writer's synchronous code (its whole batch: storage writes are
      // synchronous), never behind the I/O of other connections.
      this.collect(1);
    }
  }

  private collect(wanted: number): void {
    const { oplog } = this.storage;
    if (this.position < oplog.firstPosition) {
      throw new CommandError(
        286,
        'Resume of change stream was not possible, as the resume point may no longer be in the oplog.',
        { errorLabels: ['NonResumableChangeStreamError'] },
      );
    }
    while (!this.invalidated && this.pending.length < wanted && this.position < oplog.endPosition) {
      const entry = oplog.at(this.position)!;
      this.position += 1;
      this.addEventsOf(entry);
    }
  }

  private addEventsOf(entry: OplogEntry): void {
    const { resumePoint } = this.settings;
    eventsForEntry(entry, this.settings.scope, this.settings.showExpandedEvents).forEach(
      (raw, index) => {
        if (this.invalidated) return;
        if (resumePoint && !isAfter(resumePoint, entry.ts, index)) return;
        if (raw.invalidates) this.invalidated = true;
        const event = this.transform(this.withImages(raw.event, entry));
        if (event) this.pending.push(event);
      },
    );
  }

  private withImages(event: Document, entry: OplogEntry): Document {
    const { fullDocument, fullDocumentBeforeChange } = this.settings;
    if (entry.op === 'update' && fullDocument === 'updateLookup') {
      const current = entry.coll
        ? this.storage.getCollection(entry.db, entry.coll)?.getById(entry.documentKey?._id)
        : undefined;
      event.fullDocument = current ?? null;
    } else if (entry.op === 'update' && fullDocument !== 'default') {
      event.fullDocument = storedImage(entry, entry.fullDocument, fullDocument, 'post');
    }
    if (fullDocumentBeforeChange !== 'off' && ['update', 'replace', 'delete'].includes(entry.op)) {
      event.fullDocumentBeforeChange = storedImage(
        entry,
        entry.preImage,
        fullDocumentBeforeChange,
        'pre',
      );
    }
    return event;
  }

  /** User stages run per event; an event whose `_id` (resume token) changed is fatal. */
  private transform(event: Document): Document | undefined {
    if (this.userStages.length === 0) return event;
    let output: Document[] = [event];
    try {
      for (const stage of this.userStages) {
        if (output.length === 0) break;
        output = stage(output);
      }
    } catch (error) {
      throw badValue(error instanceof Error ? error.message : String(error));
    }
    const result = output[0];
    if (!result) return undefined;
    if (result._id !== event._id && canonicalKey(result._id) !== canonicalKey(event._id)) {
      throw new CommandError(
        280,
        'Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed. Expected: ' +
          JSON.stringify(event._id) +
          ' but found: ' +
          (result._id === undefined ? 'missing' : JSON.stringify(result._id)),
        { errorLabels: ['NonResumableChangeStreamError'] },
      );
    }
    return result;
  }
}
