import type { Document } from 'bson';
import { DocumentLineStore } from '../../../lib/store/documents/document-line-store';
import { DocumentLineFields } from '../../../lib/store/documents/document-line';
import type { DocumentCollection } from '../../../lib/store/documents/document-writes';
import {
  forceReleaseLine,
  releaseScopeInLines,
  watchLineEvents,
} from '../../../lib/store/line/line-admin';
import {
  type JoinRequest,
  type LineCollection,
  joinLine,
  leaveLine,
  renewInLine,
} from '../../../lib/store/line/line-commands';
import type { LineKind } from '../../../lib/store/line/line-document';
import { type LineWatch, watchLines } from '../../../lib/store/line/line-events';

/**
 * What the lock library (engine v2) sends, recorded from its own command and watch functions
 * against a stand-in collection: the offline server's tests use them as realistic inputs.
 */

/** One update command as the library sent it. */
export interface SentUpdate {
  /** Which call sent it, for failure messages. */
  call: string;
  filter: Document;
  pipeline: Document[];
  /** The command's `let` (the call's values), as sent: unevaluated. */
  let: Document;
  upsert: boolean;
}

/**
 * A lock collection that records every `findOneAndUpdate` and answers as if the key had an
 * empty line (so a mutex's `tryAcquire` goes on to the full join). With `refuseShortJoin`, a
 * mutex's short join to wait fails with a duplicate key, as when its filter refuses the key:
 * the full join pipeline follows.
 */
function recordingLockCollection(sent: SentUpdate[], call: string, refuseShortJoin = false) {
  const now = new Date('2026-11-22T10:00:00.000Z');
  const collection = {
    findOneAndUpdate: async (filter: Document, pipeline: Document[], options: Document) => {
      sent.push({
        call,
        filter,
        pipeline,
        let: (options.let as Document | undefined) ?? {},
        upsert: options.upsert === true,
      });
      if (refuseShortJoin && 'permits' in filter)
        throw Object.assign(new Error('E11000'), { code: 11000 });
      return { _id: filter._id as string, line: [], now };
    },
    find: () => ({ toArray: async () => [{ _id: 'k' }] }),
    findOne: async () => ({ _id: 'k', now }),
  };
  return collection as unknown as LineCollection;
}

const KINDS: LineKind[] = [
  { mode: 'exclusive' },
  { mode: 'shared' },
  { mode: 'permits', permits: 3, weight: 2 },
];

/**
 * Every update pipeline engine v2 sends on the lock collection, with its `let`: the joins
 * (each kind, to wait or `tryAcquire`, scoped or not; a mutex's short forms and full join),
 * leave, renew, `forceRelease` and `releaseScope`. `tokens`: the joining calls' tokens.
 */
export async function lockCollectionUpdates(tokens: readonly string[]): Promise<SentUpdate[]> {
  const sent: SentUpdate[] = [];
  for (const token of tokens) {
    for (const kind of KINDS) {
      for (const onlyIfHolds of [false, true]) {
        for (const scope of [undefined, 'tenant']) {
          const request: JoinRequest = {
            key: 'k',
            token,
            holderId: 'h1',
            ttlMs: 30_000,
            kind,
            onlyIfHolds,
            scope,
            idleRetentionMs: 60_000,
          };
          const call = `join ${kind.mode} ${onlyIfHolds ? 'try' : 'wait'} ${scope ?? ''}`;
          await joinLine(recordingLockCollection(sent, call), request);
          if (kind.mode === 'exclusive' && !onlyIfHolds) {
            await joinLine(recordingLockCollection(sent, `${call} (full)`, true), request);
          }
        }
      }
    }
    await leaveLine(recordingLockCollection(sent, 'leave'), 'k', token);
    await renewInLine(recordingLockCollection(sent, 'renew'), 'k', token, 20_000, 60_000);
    await renewInLine(recordingLockCollection(sent, 'expire'), 'k', token, 20_000, 60_000, true);
  }
  await forceReleaseLine(recordingLockCollection(sent, 'forceRelease'), 'k', 60_000);
  await releaseScopeInLines(recordingLockCollection(sent, 'releaseScope'), 'tenant', 60_000);
  return sent;
}

/** The `$set` stages of a document lock's line kept in the application document's `field`. */
export function documentLockStages(field: string, token: string): Document[] {
  const fields = new DocumentLineFields(field);
  return [
    fields.joinStage({ token, holderId: 'h1', ttlMs: 30_000, onlyIfHolds: false }),
    fields.joinStage({ token, holderId: 'h1', ttlMs: 30_000, onlyIfHolds: true }),
    fields.leaveStage(token),
    fields.renewStage(token, 20_000, false),
    fields.renewStage(token, 20_000, true),
  ];
}

/** One change stream as the library opens it. */
export interface OpenedStream {
  name: string;
  pipeline: Document[];
  options: Document;
}

/**
 * A collection whose `watch` records the pipeline and gives a stream that reads nothing until
 * it is closed.
 */
function recordingWatchCollection(opened: OpenedStream[], name: string) {
  return {
    watch: (pipeline: Document[], options: Document) => {
      opened.push({ name, pipeline, options });
      let close!: () => void;
      const closed = new Promise<null>((resolve) => (close = () => resolve(null)));
      return { once: () => undefined, tryNext: () => closed, close: async () => close() };
    },
  };
}

/**
 * The change streams engine v2 opens, as opened: the waiters' (`watchLines`, `$regex` on the
 * `lead` a leave writes), `events$`'s (`watchLineEvents`), and a document lock's two (field
 * `lock`), for the holder id `holderId`.
 */
export async function lockChangeStreams(holderId: string): Promise<OpenedStream[]> {
  const opened: OpenedStream[] = [];
  const lines = (name: string) =>
    recordingWatchCollection(opened, name) as unknown as LineCollection;
  const documents = (name: string) =>
    new DocumentLineStore(
      recordingWatchCollection(opened, name) as unknown as DocumentCollection,
      new DocumentLineFields('lock'),
      1_000,
    );
  const watches: LineWatch[] = [
    watchLines(lines('watchLines'), holderId, () => undefined),
    watchLineEvents(lines('watchLineEvents'), () => undefined),
    documents('document watch').watch(holderId, () => undefined),
    documents('document watchEvents').watchEvents(() => undefined),
  ];
  await Promise.all(watches.map((watch) => watch.close()));
  return opened;
}
