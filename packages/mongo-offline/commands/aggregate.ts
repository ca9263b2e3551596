import { type Document, Long } from 'bson';
import { readableCollection } from '../engine/views';
import { Aggregator } from 'mingo/aggregator';
import { idFirst } from '../engine/apply-update';
import { bindSystemVariables } from '../engine/system-variables';
import { withOptions } from '../engine/mingo-options';
import { applyCollationToPipeline } from '../engine/collation';
import { openChangeStream } from '../change-streams/open-change-stream';
import type { CommandContext, CommandHandler } from './context';
import { ArrayCursor } from './cursor-registry';
import { CommandError, badValue } from './errors';
import { validatePipeline } from './pipeline-stages';
import { writeMerge, writeOut } from './aggregate-writes';
import { afterTransactions } from './transaction-waits';
import { openCursor } from './read-commands';

function runPipeline(
  context: CommandContext,
  source: Document[],
  pipeline: Document[],
): Document[] {
  const { storage, db } = context;
  try {
    const aggregator = new Aggregator(
      applyCollationToPipeline(
        bindSystemVariables(pipeline, context.mingo.variables ?? {}),
        context.mingo.collation,
      ),
      withOptions(context.mingo, {
        collectionResolver: (name: string) => [
          ...(readableCollection(storage, db, name, context.mingo)?.documents.values() ?? []),
        ],
      }),
    );
    return aggregator.run<Document>(source);
  } catch (error) {
    if (error instanceof CommandError) throw error;
    throw badValue(error instanceof Error ? error.message : String(error));
  }
}

/** `{aggregate: 1}` reads no collection: its first stage produces the documents. */
function databaseLevelSource(context: CommandContext, first: Document | undefined): Document[] {
  const name = first ? Object.keys(first)[0] : '';
  if (name === '$documents') {
    const documents = runPipeline(
      context,
      [{}],
      [{ $project: { _id: 0, documents: first!.$documents } }],
    )[0]?.documents;
    if (!Array.isArray(documents))
      throw new CommandError(5858203, 'error during $documents: an array is required');
    return documents as Document[];
  }
  if (name === '$listLocalSessions') return [...context.server.sessions.values()];
  if (name === '$currentOp') return [];
  throw new CommandError(
    73,
    `{aggregate: 1} is not valid for '${name}'; a collection is required.`,
  );
}

const aggregate: CommandHandler = async (context) => {
  const { command } = context;
  const pipeline = command.pipeline;
  if (!Array.isArray(pipeline))
    throw new CommandError(14, "'pipeline' option must be specified as an array");
  if (command.cursor === undefined && command.explain !== true) {
    throw new CommandError(
      9,
      "The 'cursor' option is required, except for aggregate with the explain argument",
    );
  }
  const stages = pipeline as Document[];
  if (stages.length > 0 && '$changeStream' in stages[0]) return openChangeStream(context, stages);
  validatePipeline(stages);
  const aggregatesDatabase = command.aggregate === 1;
  const last = stages[stages.length - 1];
  const outTarget: unknown = last ? (last.$out ?? undefined) : undefined;
  const mergeSpec: unknown = last ? (last.$merge ?? undefined) : undefined;
  const writes = outTarget !== undefined || mergeSpec !== undefined;
  if (writes && (command.readConcern as Document | undefined)?.level === 'linearizable') {
    throw new CommandError(
      72,
      "{readConcern: {level: 'linearizable'}} is not allowed with $out or $merge",
    );
  }
  let body = writes ? stages.slice(0, -1) : stages;
  let source: Document[];
  if (aggregatesDatabase) {
    source = databaseLevelSource(context, body[0]);
    body = body.slice(1);
  } else {
    const collection = readableCollection(
      context.storage,
      context.db,
      context.collectionName,
      context.mingo,
    );
    source = collection ? [...collection.documents.values()] : [];
  }
  // MongoDB keeps `_id` first in what a pipeline outputs; mingo's $project appends it.
  const results = runPipeline(context, source, body).map(idFirst);
  if (writes) {
    await afterTransactions(context, () =>
      outTarget !== undefined
        ? writeOut(context, outTarget, results)
        : writeMerge(context, mergeSpec, results),
    );
    return { cursor: { firstBatch: [], id: Long.ZERO, ns: context.ns }, ok: 1 };
  }
  const cursorOptions = (command.cursor as Document) ?? {};
  const ns = aggregatesDatabase ? `${context.db}.$cmd.aggregate` : context.ns;
  const cursor = new ArrayCursor(
    context.server.cursors.newId(),
    ns,
    results,
    command.lsid as Document | undefined,
  );
  return openCursor(context, cursor, cursorOptions.batchSize as number | undefined);
};

export const aggregateCommands: Record<string, CommandHandler> = { aggregate };
