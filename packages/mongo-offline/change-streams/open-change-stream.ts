import { type Document, Timestamp } from 'bson';
import type { CommandContext } from '../commands/context';
import { CommandError } from '../commands/errors';
import { CHANGE_STREAM_STAGES, stageName, validatePipeline } from '../commands/pipeline-stages';
import { openCursor } from '../commands/read-commands';
import type { StreamScope } from './change-events';
import { ChangeStreamCursor, type ChangeStreamSettings } from './change-stream-cursor';
import { type ResumePoint, decodeResumeToken, highWaterMark } from './resume-token';

function scopeOf(context: CommandContext, options: Document): StreamScope {
  const target: unknown = context.command.aggregate;
  const clusterWide = options.allChangesForCluster === true;
  if (typeof target === 'string') {
    if (clusterWide)
      throw new CommandError(
        73,
        "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name",
      );
    return { level: 'collection', db: context.db, coll: target };
  }
  if (context.db === 'admin') {
    if (!clusterWide)
      throw new CommandError(73, '$changeStream may not be opened on the internal admin database');
    return { level: 'cluster' };
  }
  if (clusterWide)
    throw new CommandError(
      73,
      "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name",
    );
  return { level: 'database', db: context.db };
}

/** The time just before `ts`: a high-water mark there makes `ts` itself included. */
function justBefore(ts: Timestamp): Timestamp {
  if (ts.low > 0) return new Timestamp({ t: ts.high >>> 0, i: (ts.low >>> 0) - 1 });
  return new Timestamp({ t: (ts.high >>> 0) - 1, i: 0xffffffff });
}

/**
 * MongoDB refuses a resume point older than its oplog (ChangeStreamHistoryLost): one dropped for
 * capacity, or one from before this server's start (a restart keeps no history; a mongod
 * restarted on an empty data directory has none either). To the second's increment: a point of
 * the old server within the new one's first second may pass.
 */
function assertHistoryKept(context: CommandContext, ts: Timestamp): void {
  const { oplog, historyStart } = context.server.storage;
  const oldest = oplog.entries[0];
  const dropped = oplog.firstPosition > 0 && oldest && ts.compare(oldest.ts) < 0;
  if (dropped || ts.compare(historyStart) < 0) {
    throw new CommandError(
      286,
      'Resume of change stream was not possible, as the resume point may no longer be in the oplog.',
      { errorLabels: ['NonResumableChangeStreamError'] },
    );
  }
}

function startingPoint(
  context: CommandContext,
  options: Document,
): Pick<ChangeStreamSettings, 'position' | 'resumePoint' | 'initialToken'> {
  const { storage } = context.server;
  const given = [options.resumeAfter, options.startAfter, options.startAtOperationTime].filter(
    (value) => value !== undefined,
  );
  if (given.length > 1)
    throw new CommandError(
      40674,
      'Only one type of resume option is allowed, but multiple were found.',
    );
  const token: unknown = options.startAfter ?? options.resumeAfter;
  if (token !== undefined) {
    const resumePoint: ResumePoint = decodeResumeToken(token);
    if (resumePoint.kind === 'invalidate' && options.resumeAfter !== undefined) {
      throw new CommandError(
        260,
        "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.",
      );
    }
    assertHistoryKept(context, resumePoint.ts);
    return {
      position: storage.oplog.positionAtOrAfter(resumePoint.ts),
      resumePoint,
      initialToken: token as Document,
    };
  }
  if (options.startAtOperationTime !== undefined) {
    const ts = options.startAtOperationTime;
    if (!(ts instanceof Timestamp))
      throw new CommandError(
        14,
        "BSON field '$changeStream.startAtOperationTime' is the wrong type, expected type 'timestamp'",
      );
    assertHistoryKept(context, ts);
    return {
      position: storage.oplog.positionAtOrAfter(ts),
      initialToken: highWaterMark(justBefore(ts)),
    };
  }
  return { position: storage.oplog.endPosition, initialToken: highWaterMark(storage.clock.now()) };
}

/** `aggregate` whose first stage is `$changeStream`: opens a tailing cursor over the oplog. */
export async function openChangeStream(
  context: CommandContext,
  pipeline: Document[],
): Promise<Document> {
  if (!context.server.options.replicaSet) {
    throw new CommandError(40573, 'The $changeStream stage is only supported on replica sets');
  }
  validatePipeline(pipeline);
  const userStages = pipeline.slice(1);
  for (const stage of userStages) {
    const name = stageName(stage);
    if (!CHANGE_STREAM_STAGES.has(name))
      throw new CommandError(20, `${name} is not permitted in a $changeStream pipeline`);
  }
  const options = (pipeline[0].$changeStream as Document) ?? {};
  const scope = scopeOf(context, options);
  const settings: ChangeStreamSettings = {
    scope,
    ...startingPoint(context, options),
    fullDocument: typeof options.fullDocument === 'string' ? options.fullDocument : 'default',
    fullDocumentBeforeChange:
      typeof options.fullDocumentBeforeChange === 'string'
        ? options.fullDocumentBeforeChange
        : 'off',
    showExpandedEvents: options.showExpandedEvents === true,
    userStages,
  };
  const ns =
    scope.level === 'collection' ? `${context.db}.${scope.coll}` : `${context.db}.$cmd.aggregate`;
  const cursor = new ChangeStreamCursor(
    context.server.cursors.newId(),
    ns,
    context.server.storage,
    settings,
    context.command.lsid as Document | undefined,
  );
  const cursorOptions = (context.command.cursor as Document) ?? {};
  return openCursor(context, cursor, cursorOptions.batchSize as number | undefined);
}
