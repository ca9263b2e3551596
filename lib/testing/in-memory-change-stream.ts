import { MongoServerError } from 'mongodb';
import type {
  ChangeStreamDocument,
  ChangeStreamInsertDocument,
  ChangeStreamUpdateDocument,
  ResumeToken,
} from 'mongodb';
import type { LockChangeScope, OpenLockChangeStreamOptions } from '../store/lock-change-stream';
import type { LockChangeStream, LockDocument } from '../store/lock-document';
import type { InMemoryChangeLog, LoggedChange } from './in-memory-change-log';

/** The namespace that change events name (nothing reads it; it is there for fidelity). */
const NAMESPACE = { db: 'test', coll: 'locks' };

/**
 * The driver's types require `collectionUUID`, which servers send only with
 * `showExpandedEvents` (the library never asks for it).
 */
type WithoutUuid<T> = Omit<T, 'collectionUUID'>;

/** What a resume token of the in-memory log holds: the sequence number of the last change seen. */
interface InMemoryResumeToken {
  _data: string;
}

function tokenFor(seq: number): InMemoryResumeToken {
  return { _data: seq.toString(16).padStart(16, '0') };
}

function seqOf(token: ResumeToken): number | undefined {
  const data = (token as Partial<InMemoryResumeToken> | null)?._data;
  if (typeof data !== 'string' || !/^[0-9a-f]{16}$/.test(data)) return undefined;
  return Number.parseInt(data, 16);
}

/** The server's error for a resume point the oplog no longer covers (`ChangeStreamHistoryLost`). */
function historyLost(): MongoServerError {
  return new MongoServerError({
    message: 'Resume point is no longer in the in-memory change log',
    errmsg: 'Resume point is no longer in the in-memory change log',
    code: 286,
    codeName: 'ChangeStreamHistoryLost',
  });
}

/**
 * `lock-change-stream.ts`'s server-side filters, applied to the log (which keeps only updates
 * of `owner`, `frees` or `fence`: all that the `ownership` filter lets through).
 */
function passes(change: LoggedChange, scope: LockChangeScope): boolean {
  if (change.operationType === 'insert') return scope === 'ownership';
  return (
    scope === 'ownership' || change.updatedFields.owner === null || 'frees' in change.updatedFields
  );
}

/**
 * A change stream over the in-memory lock collection with the driver's `tryNext` contract:
 * resolves with the next change, or with `null` once `maxAwaitTimeMS` passed without one (the
 * first call answers at once, as the opening aggregate does). Starts where the store's
 * change stream would: after `resumeAfter`, at `startAtOperationTime` (inclusive), or at the
 * next change. Changes are the documents MongoDB sends for the library's filters: `insert`
 * with the document, `update` with the changed fields only, and for the `ownership` scope the
 * document as it is when the change is read (`fullDocument: 'updateLookup'`).
 */
export class InMemoryChangeStream implements LockChangeStream {
  private position: number | undefined;
  private token: InMemoryResumeToken | undefined;
  private isClosed = false;
  private answeredOnce = false;
  private waiting: { wake: () => void } | undefined;
  private readonly unsubscribe: () => void;
  private readonly scope: LockChangeScope;
  private readonly maxAwaitTimeMS: number;

  constructor(
    private readonly log: InMemoryChangeLog,
    private readonly lookUp: (key: string) => LockDocument | undefined,
    options: OpenLockChangeStreamOptions,
    private readonly onClose: (stream: InMemoryChangeStream) => void,
  ) {
    this.scope = options.scope ?? 'ownership';
    this.maxAwaitTimeMS = options.maxAwaitTimeMS ?? 1_000;
    if (options.resumeAfter !== undefined) {
      const seq = seqOf(options.resumeAfter);
      this.position = seq !== undefined && seq + 1 >= log.oldestKeptSeq ? seq + 1 : undefined;
    } else if (options.startAtOperationTime !== undefined) {
      this.position = log.firstSeqAtOrAfter(options.startAtOperationTime);
    } else {
      this.position = log.newestSeq + 1;
    }
    this.unsubscribe = log.subscribe(() => this.waiting?.wake());
  }

  get resumeToken(): ResumeToken {
    return this.token;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  async tryNext(): Promise<ChangeStreamDocument<LockDocument> | null> {
    if (this.isClosed) throw new Error('ChangeStream is closed');
    if (this.position === undefined) throw historyLost();
    const first = !this.answeredOnce;
    this.answeredOnce = true;
    const change = this.take();
    if (change || first) return change;
    await this.changeOrTimeout();
    return this.isClosed ? null : this.take();
  }

  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.unsubscribe();
    this.waiting?.wake();
    this.onClose(this);
  }

  /** The next change that passes the filter; with none, the token moves to the log's end. */
  private take(): ChangeStreamDocument<LockDocument> | null {
    let position = this.position as number;
    if (position < this.log.oldestKeptSeq) {
      // Dropped under a slow reader: it cannot go on from here.
      this.position = undefined;
      throw historyLost();
    }
    for (; position <= this.log.newestSeq; position += 1) {
      const change = this.log.at(position) as LoggedChange;
      if (!passes(change, this.scope)) continue;
      this.position = position + 1;
      this.token = tokenFor(change.seq);
      return this.toChangeDocument(change);
    }
    this.position = position;
    // The post-batch resume token: a resumed stream goes on after everything seen empty.
    this.token = tokenFor(position - 1);
    return null;
  }

  private changeOrTimeout(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => wake(), this.maxAwaitTimeMS);
      // A forgotten stream must not keep a test process alive.
      timer.unref();
      const wake = () => {
        clearTimeout(timer);
        this.waiting = undefined;
        resolve();
      };
      this.waiting = { wake };
    });
  }

  private toChangeDocument(change: LoggedChange): ChangeStreamDocument<LockDocument> {
    const common = {
      _id: tokenFor(change.seq),
      clusterTime: change.clusterTime,
      wallTime: change.wallTime,
      ns: NAMESPACE,
      documentKey: { _id: change.key },
    };
    if (change.operationType === 'insert') {
      const insert: WithoutUuid<ChangeStreamInsertDocument<LockDocument>> = {
        ...common,
        operationType: 'insert',
        fullDocument: change.fullDocument,
      };
      return insert as ChangeStreamDocument<LockDocument>;
    }
    // `updateLookup`: the document as it is now, which may be a later state than this change.
    const lookedUp = this.scope === 'ownership' ? this.lookUp(change.key) : undefined;
    const update: WithoutUuid<ChangeStreamUpdateDocument<LockDocument>> = {
      ...common,
      operationType: 'update',
      updateDescription: {
        updatedFields: change.updatedFields,
        removedFields: change.removedFields ?? [],
        truncatedArrays: [],
      },
      ...(lookedUp ? { fullDocument: lookedUp } : {}),
    };
    return update as ChangeStreamDocument<LockDocument>;
  }
}
