import type { ChangeStream, ChangeStreamDocument } from 'mongodb';
import { sleep } from '../../util/timers';
import type { LineDocument } from './line-document';
import { holdingCount } from './line-document';
import type { LineCollection } from './line-commands';

/** A key's line changed: the tokens whose entries now hold it, in line order. */
export interface LineChange {
  key: string;
  holders: string[];
}

/**
 * Watches the lock collection and reports, for every write to a key, who holds it after the
 * write. Every write drops the dead entries, so the entries of a written document were all
 * live at that write: an entry in its holding prefix holds from then on, whatever time the
 * event arrives at (nobody joins ahead of an entry, and the ones ahead only leave), until its
 * own lease ends, which its process knows from its own last write.
 */
/**
 * The events that can make an entry of `holderId`'s process holder: a leave that changed the
 * front of a line to it (or to a shared entry or a semaphore's, where several may hold; see
 * `LEAD`). Joins append, and the joiner learns from its reply; an entry ahead that runs out is
 * confirmed by the waiter's own renewal, on its timer.
 */
function leadsTo(holderId: string) {
  const escaped = holderId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return {
    operationType: 'update',
    // The id whole: `a` must not match the leads of a holder `a b`.
    'updateDescription.updatedFields.lead': { $regex: `^(\\*|${escaped}) [\\w-]+$` },
  };
}

export interface LineWatch {
  /** Resolves once the stream is open: a write after that is heard. */
  opened: Promise<void>;
  close(): Promise<void>;
}

export function watchLines(
  collection: LineCollection,
  holderId: string,
  onChange: (change: LineChange) => void,
  onFailure: (error: unknown) => void = () => undefined,
): LineWatch {
  let closing = false;
  let stream: ChangeStream<LineDocument, ChangeStreamDocument<LineDocument>> | undefined;
  let markOpened!: () => void;
  // Settles on the first read, or the first failure: nobody waits on a stream that cannot open.
  const opened = new Promise<void>((resolve) => (markOpened = resolve));
  const readOnce = async () => {
    stream = collection.watch<LineDocument, ChangeStreamDocument<LineDocument>>(
      [{ $match: leadsTo(holderId) }],
      { fullDocument: 'updateLookup', maxAwaitTimeMS: 1_000 },
    );
    // The driver resumes after resumable errors by itself; any other ends this stream.
    while (!closing) {
      const event = await stream.tryNext();
      markOpened();
      if (!event || !('fullDocument' in event) || !event.fullDocument) continue;
      const doc = event.fullDocument;
      const line = doc.line ?? [];
      const holders = line.slice(0, holdingCount(line, doc.permits)).map((entry) => entry.t);
      onChange({ key: doc._id, holders });
    }
  };
  const reading = (async () => {
    // A failed stream is reopened after a pause; waiters meanwhile wake on their own timers.
    for (let pauseMs = 100; !closing; pauseMs = Math.min(pauseMs * 2, 5_000)) {
      try {
        await readOnce();
      } catch (error) {
        if (closing) return;
        markOpened();
        onFailure(error);
        await stream?.close().catch(() => undefined);
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
