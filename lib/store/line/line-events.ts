import {
  type ChangeStream,
  type ChangeStreamDocument,
  type ChangeStreamOptions,
  type Document,
  type ResumeToken,
  Timestamp,
} from 'mongodb';
import { isResumePointLostError } from '../mongo-error-codes';
import { setImmediate } from 'node:timers';
import { settledBy, sleep } from '../../util/timers';
import type { HoldingEntry, LineDocument } from './line-document';
import { holdersOf, holdingEntry } from './line-document';
import { isLookAgainLead } from './line-pipelines';
import type { LineCollection } from './line-commands';

/** A key's line changed: the entries that now hold it, in line order. */
export interface LineChange {
  key: string;
  holders: HoldingEntry[];
  /**
   * The change may have removed waiting entries (an operator's command, a document replaced): the
   * key's waiters look.
   */
  lookAgain?: boolean;
  /** An operator's command (`forceRelease`, `releaseScope`) wrote it: it may have removed holders. */
  byOperator?: boolean;
  /** For the holders: a document lock's document, as read after the change. */
  news?: unknown;
}

/**
 * Changes that can make an entry of `holderId`'s process holder: a leave that set `lead` to it
 * or to everyone (see `LEAD`), and a lease cut short. A joiner learns from its reply; an entry
 * ahead that runs out is noticed by the waiter's own renewal timer. MongoDB logs a pipeline
 * update whose delta is not smaller than the document as a replacement, streamed as `replace`:
 * its `lead` is as written.
 */
function leadsTo(holderId: string) {
  const leads = { $regex: leadPattern(holderId) };
  return {
    $or: [
      { operationType: 'update', 'updateDescription.updatedFields.lead': leads },
      { operationType: 'replace', 'fullDocument.lead': leads },
    ],
  };
}

/**
 * The `lead` values for `holderId`'s process: its id whole, everyone's `*`, an operator's `!`,
 * a lease cut short's `?` (`EXPIRE_PIPELINE`).
 */
export function leadPattern(holderId: string): string {
  const escaped = holderId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // The id whole: `a` must not match the leads of a holder `a b`.
  return `^([*!?]|${escaped}) [\\w-]+$`;
}

/** Who holds the key after a change that {@link leadsTo} matched. */
export function lineChangeOf(event: ChangeStreamDocument<LineDocument>): LineChange | undefined {
  if (!('fullDocument' in event) || !event.fullDocument) return undefined;
  const doc = event.fullDocument;
  const holders = holdersOf(doc).map(holdingEntry);
  const lead =
    event.operationType === 'update' ? event.updateDescription.updatedFields?.lead : doc.lead;
  const byOperator = lead?.[0] === '!';
  // An operator's write may have removed waiting entries, a lease cut short ends before the time
  // its waiters read, and a replacement may have changed anything.
  const lookAgain = byOperator || isLookAgainLead(lead) || event.operationType === 'replace';
  return {
    key: doc._id,
    holders,
    ...(lookAgain ? { lookAgain } : {}),
    ...(byOperator ? { byOperator } : {}),
  };
}

export interface LineWatch {
  /** Resolves once the stream is open: a write after that is heard. */
  opened: Promise<void>;
  close(): Promise<void>;
}

/**
 * Reports who holds the key after each change {@link leadsTo} `holderId`'s process. A written
 * document's entries were all live, so one in its holding prefix holds from then on, however
 * late the event (nobody joins ahead; those ahead only leave), until its own lease ends.
 */
export function watchLines(
  collection: LineCollection,
  holderId: string,
  onChange: (change: LineChange) => void,
  onFailure: (error: unknown) => void = () => undefined,
  onOpen?: () => void,
  answerWithinMs?: number,
): LineWatch {
  return reopeningStream<ChangeStreamDocument<LineDocument>>(
    (resuming) =>
      collection.watch<LineDocument, ChangeStreamDocument<LineDocument>>(
        [{ $match: leadsTo(holderId) }],
        { fullDocument: 'updateLookup', ...resuming },
      ),
    (event) => {
      const change = lineChangeOf(event);
      if (change) onChange(change);
    },
    onFailure,
    onOpen,
    { answerWithinMs },
  );
}

/** The longest a `getMore` waits for changes before it answers an empty batch. */
const MAX_AWAIT_MS = 1_000;
/**
 * The least `answerWithinMs`, and its default: a loaded server answers a read late now and then,
 * and each stall reopens the stream and makes every waiter read its place.
 */
const MIN_ANSWER_WITHIN_MS = 5_000;

/** A stream's read unanswered in time (see {@link reopeningStream}): treated as failed. */
export class StreamStalledError extends Error {}

/**
 * The server closed the stream's cursor (after `invalidate`: the collection or its database
 * dropped or renamed). The driver's `tryNext()` then answers null at once, without I/O: read
 * on, it would never let the event loop turn. Nothing follows an invalidate: reopened afresh.
 */
export class StreamInvalidatedError extends Error {}

/**
 * Hands each change of `open`'s stream to `onChange`. On a failure the driver cannot resume, or
 * a read unanswered `answerWithinMs` past its wait (a connection gone silent: the driver would
 * wait for ever; at least 5 s, doubled after each stall up to a minute or `answerWithinMs`,
 * until a read is answered in time), `onFailure` hears why and the stream reopens after a pause,
 * after its last change (or afresh if that point is lost; readers then wake on their timers).
 * `onOpen` hears each start; `opened` settles on the first start, failure or close: nobody waits
 * on a stream that cannot open.
 */
export function reopeningStream<Change extends Document>(
  /** Opens the stream with `resuming`: where to start, and the wait per `getMore`. */
  open: (resuming: ChangeStreamOptions) => ChangeStream<LineDocument, Change>,
  onChange: (change: Change) => void,
  onFailure: (error: unknown) => void,
  onOpen: () => void = () => undefined,
  {
    startAt,
    answerWithinMs = MIN_ANSWER_WITHIN_MS,
  }: {
    /**
     * Where a stream without a resume token starts: the time of watching, so a first `aggregate`
     * held back (no selectable server) still sees every change since. None: from when it runs.
     */
    startAt?: Timestamp;
    /** How late past its wait a read may be answered (`operationTimeoutMs`; at least 5 s). */
    answerWithinMs?: number;
  } = {},
): LineWatch {
  const promptMs = Math.max(answerWithinMs, MIN_ANSWER_WITHIN_MS);
  // Doubled after each stall (a slow server would cost a connection and every waiter a read
  // per cycle), back to `promptMs` once a read is answered within it.
  let allowedMs = promptMs;
  const stalled = () =>
    new StreamStalledError(`a change stream read was not answered within ${allowedMs} ms`);
  let closing = false;
  let stream: ChangeStream<LineDocument, Change> | undefined;
  let resumeAfter: ResumeToken = undefined;
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
    stream = open({
      maxAwaitTimeMS: MAX_AWAIT_MS,
      ...(resumeAfter != null ? { resumeAfter } : startAt ? { startAtOperationTime: startAt } : {}),
    });
    // Started once the first reply sets a resume token: the first `tryNext` waits for a change.
    stream.once('resumeTokenChanged', start);
    while (!closing) {
      // A change already buffered says nothing of how promptly the server answers.
      const fromServer = !(stream.bufferedCount?.() > 0);
      const sentAt = performance.now();
      const change = await settledBy(
        stream.tryNext(),
        sentAt + MAX_AWAIT_MS + allowedMs,
        undefined,
        stalled,
      );
      if (fromServer && performance.now() - sentAt <= MAX_AWAIT_MS + promptMs) {
        allowedMs = promptMs;
      }
      read = true;
      start();
      if (!change) {
        if (stream.closed) {
          throw new StreamInvalidatedError('MongoDB closed the change stream (invalidated)');
        }
        continue;
      }
      onChange(change);
      // Before a getMore (or always, without `bufferedCount`), yield so woken callers run first.
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
        // Resume after its last change, or where it started if it read none.
        resumeAfter = stream?.resumeToken ?? resumeAfter;
        if (isResumePointLostError(error) || error instanceof StreamInvalidatedError) {
          resumeAfter = startAt = undefined;
        }
        markOpened();
        onFailure(error);
        // A stalled read is not waited for: the stream reopens on another connection.
        const closed = stream?.close().catch(() => undefined);
        if (error instanceof StreamStalledError) {
          allowedMs = Math.min(allowedMs * 2, Math.max(60_000, promptMs));
        } else await closed;
        // Reads that went through reset the backoff.
        pauseMs = read ? 100 : Math.min(pauseMs * 2, 1_000);
        await sleep(pauseMs, false);
      }
    }
  })();
  return {
    opened,
    close: async () => {
      closing = true;
      // A closed stream will not open: nobody waits for it.
      markOpened();
      await stream?.close();
      await reading;
    },
  };
}

/**
 * Just after the newest cluster time the client has seen (on its topology, outside the typings):
 * no later than any write after this call. None before the client connects.
 */
export function lastClusterTime(collection: object): Timestamp | undefined {
  const { client } = collection as {
    client?: { topology?: { clusterTime?: { clusterTime?: Timestamp } } };
  };
  const seen = client?.topology?.clusterTime?.clusterTime;
  if (seen === undefined) return undefined;
  return new Timestamp({ t: seen.high >>> 0, i: Math.min((seen.low >>> 0) + 1, 0xffffffff) });
}
