import {
  type ChangeStream,
  type ChangeStreamDocument,
  type Document,
  type ResumeToken,
  Timestamp,
} from 'mongodb';
import { isResumePointLostError } from '../mongo-error-codes';
import { setImmediate } from 'node:timers';
import { sleep } from '../../util/timers';
import type { HoldingEntry, LineDocument } from './line-document';
import { holdingCount, holdingEntry } from './line-document';
import type { LineCollection } from './line-commands';

/** A key's line changed: the entries that now hold it, in line order. */
export interface LineChange {
  key: string;
  holders: HoldingEntry[];
  /** The change may have ended entries in other ways (a document replaced): the key's waiters look. */
  lookAgain?: boolean;
  /** What the change carries for its holders (a document lock's document, as read after it). */
  news?: unknown;
}

/**
 * The events that can make an entry of `holderId`'s process holder: a leave that changed the
 * front of a line to it (or to a shared entry or a semaphore's, where several may hold; see
 * `LEAD`). Joins append, and the joiner learns from its reply; an entry ahead that runs out is
 * confirmed by the waiter's own renewal, on its timer.
 */
function leadsTo(holderId: string) {
  return {
    operationType: 'update',
    'updateDescription.updatedFields.lead': { $regex: leadPattern(holderId) },
  };
}

/** The `lead` values that concern `holderId`'s process: its own id whole, or everyone's `*`. */
export function leadPattern(holderId: string): string {
  const escaped = holderId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // The id whole: `a` must not match the leads of a holder `a b`.
  return `^(\\*|${escaped}) [\\w-]+$`;
}

/** What a change that {@link leadsTo} matched says: who holds its key after the write. */
export function lineChangeOf(event: ChangeStreamDocument<LineDocument>): LineChange | undefined {
  if (!('fullDocument' in event) || !event.fullDocument) return undefined;
  const doc = event.fullDocument;
  const line = doc.line ?? [];
  const holders = line.slice(0, holdingCount(line, doc.permits)).map(holdingEntry);
  return { key: doc._id, holders };
}

export interface LineWatch {
  /** Resolves once the stream is open: a write after that is heard. */
  opened: Promise<void>;
  close(): Promise<void>;
}

/**
 * Watches the lock collection for the changes {@link leadsTo} `holderId`'s process, and reports
 * who holds the key after each. Every write drops the dead entries, so the entries of a written
 * document were all live at that write: an entry in its holding prefix holds from then on,
 * whatever time the event arrives at (nobody joins ahead of an entry, and the ones ahead only
 * leave), until its own lease ends, which its process knows from its own last write.
 */
export function watchLines(
  collection: LineCollection,
  holderId: string,
  onChange: (change: LineChange) => void,
  onFailure: (error: unknown) => void = () => undefined,
  onOpen?: () => void,
): LineWatch {
  return reopeningStream<ChangeStreamDocument<LineDocument>>(
    (resumeAfter) =>
      collection.watch<LineDocument, ChangeStreamDocument<LineDocument>>(
        [{ $match: leadsTo(holderId) }],
        { fullDocument: 'updateLookup', maxAwaitTimeMS: 1_000, ...resumingAfter(resumeAfter) },
      ),
    (event) => {
      const change = lineChangeOf(event);
      if (change) onChange(change);
    },
    onFailure,
    onOpen,
  );
}

/**
 * Reads the change stream `open` makes and hands each change to `onChange`. The driver resumes
 * after resumable errors by itself; a stream that fails otherwise is reopened after a pause,
 * resuming after the last change it read (so nothing written meanwhile is missed, unless the
 * server cannot resume from there: then afresh, and readers wake on their own timers), and
 * `onFailure` hears why; `onOpen` hears each time a stream, the first or a reopened one, has
 * its starting point. `opened` settles the first time, or on the first failure: nobody waits
 * on a stream that cannot open.
 */
export function reopeningStream<Change extends Document>(
  open: (resumeAfter: ResumeToken, startAt?: Timestamp) => ChangeStream<LineDocument, Change>,
  onChange: (change: Change) => void,
  onFailure: (error: unknown) => void,
  onOpen: () => void = () => undefined,
  /**
   * Where a stream with no resume token yet starts: the caller's time of watching, so that a
   * first `aggregate` held back (no server selectable, e.g. for up to 500 ms after a state
   * change error) still reports every change written since. None: where the aggregate runs.
   */
  startAt?: Timestamp,
): LineWatch {
  let closing = false;
  let stream: ChangeStream<LineDocument, Change> | undefined;
  let resumeAfter: ResumeToken = undefined;
  /** Whether the current stream has its starting point, and whether a read of it succeeded. */
  let started = false;
  let read = false;
  let markOpened!: () => void;
  const opened = new Promise<void>((resolve) => (markOpened = resolve));
  const start = () => {
    if (started || closing) return;
    started = true;
    markOpened();
    onOpen();
  };
  const readOnce = async () => {
    started = false;
    read = false;
    stream = open(resumeAfter, resumeAfter == null ? startAt : undefined);
    // Open once its first reply set where it starts (the driver's first resume token): the
    // first `tryNext` would wait for a change, or for the server's await time, to say so.
    stream.once('resumeTokenChanged', start);
    while (!closing) {
      const change = await stream.tryNext();
      read = true;
      start();
      if (!change) continue;
      onChange(change);
      // A read past the batch is a getMore, the driver's work on this thread: it waits a turn,
      // so that the callers the change woke run first and a hand-off ends that much sooner.
      // (A driver without `ChangeStream.bufferedCount` waits after every change.)
      if (!(stream.bufferedCount?.() > 0)) await new Promise((resolve) => setImmediate(resolve));
    }
  };
  const reading = (async () => {
    let pauseMs = 50;
    while (!closing) {
      try {
        await readOnce();
      } catch (error) {
        if (closing) return;
        // Where it stood: its last change, or where it started if it read none.
        resumeAfter = stream?.resumeToken ?? resumeAfter;
        if (isResumePointLostError(error)) resumeAfter = startAt = undefined;
        markOpened();
        onFailure(error);
        await stream?.close().catch(() => undefined);
        // A stream whose reads went through before it failed starts the backoff afresh.
        pauseMs = read ? 100 : Math.min(pauseMs * 2, 1_000);
        await sleep(pauseMs, false);
      }
    }
  })();
  return {
    opened,
    close: async () => {
      closing = true;
      await stream?.close();
      await reading;
    },
  };
}

/**
 * Just after the newest cluster time `collection`'s client has seen (the driver keeps it on its
 * topology, outside its typings): no later than any write made after this call, and past the
 * writes the client already heard of. None if the client has seen none (not connected yet).
 */
export function lastClusterTime(collection: object): Timestamp | undefined {
  const { client } = collection as {
    client?: { topology?: { clusterTime?: { clusterTime?: Timestamp } } };
  };
  const seen = client?.topology?.clusterTime?.clusterTime;
  if (seen === undefined) return undefined;
  return new Timestamp({ t: seen.high >>> 0, i: Math.min((seen.low >>> 0) + 1, 0xffffffff) });
}

/** The start of a fresh stream (no token) at `time`; none when there is a token or no time. */
export function startingAt(time: Timestamp | undefined): { startAtOperationTime?: Timestamp } {
  return time === undefined ? {} : { startAtOperationTime: time };
}

/** The option that resumes a reopened stream after `token`; none for a fresh one (no token). */
export function resumingAfter(token: ResumeToken): { resumeAfter?: ResumeToken } {
  return token === undefined || token === null ? {} : { resumeAfter: token };
}
