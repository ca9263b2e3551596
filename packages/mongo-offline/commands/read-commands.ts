import { type Document, Long } from 'bson';
import { readableCollection } from '../engine/views';
import { projectDocuments } from '../engine/project';
import { selectDocuments, sortDocuments } from '../engine/select';
import { canonicalKey } from '../engine/bson-values';
import { collator } from '../engine/collation';
import type { CommandContext, CommandHandler } from './context';
import { ArrayCursor, type ServerCursor, cursorReply } from './cursor-registry';
import { CommandError } from './errors';

function toNumber(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number') return value;
  if (value instanceof Long) return value.toNumber();
  return Number(value);
}

/** Serves the first batch and registers a cursor for the rest (unless singleBatch). */
export async function openCursor(
  context: CommandContext,
  cursor: ServerCursor,
  batchSize: number | undefined,
  singleBatch = false,
): Promise<Document> {
  const batch = await cursor.nextBatch(context, batchSize);
  if (singleBatch) batch.exhausted = true;
  if (!batch.exhausted) context.server.cursors.add(cursor);
  return cursorReply(cursor.id, cursor.ns, 'firstBatch', batch);
}

const find: CommandHandler = async (context) => {
  const { command } = context;
  const collection = readableCollection(
    context.storage,
    context.db,
    context.collectionName,
    context.mingo,
  );
  const sort = command.sort as Document | undefined;
  const skip = toNumber(command.skip) ?? 0;
  const rawLimit = toNumber(command.limit) ?? 0;
  if (skip < 0)
    throw new CommandError(
      51024,
      "BSON field 'skip' value must be >= 0, actual value '" + skip + "'",
    );
  const limit = Math.abs(rawLimit);
  const scanLimit = !sort && limit > 0 ? skip + limit : 0;
  let documents = selectDocuments(
    collection,
    (command.filter as Document) ?? {},
    context.mingo,
    scanLimit,
  );
  documents = sortDocuments(documents, sort, context.mingo);
  documents = documents.slice(skip, limit > 0 ? skip + limit : undefined);
  documents = projectDocuments(
    documents,
    command.projection as Document | undefined,
    context.mingo,
  );
  const cursor = new ArrayCursor(
    context.server.cursors.newId(),
    context.ns,
    documents,
    command.lsid as Document | undefined,
  );
  const singleBatch = command.singleBatch === true || rawLimit < 0;
  return openCursor(context, cursor, toNumber(command.batchSize), singleBatch);
};

const getMore: CommandHandler = async (context) => {
  const id = toNumber(context.command.getMore) ?? 0;
  const cursor = context.server.cursors.get(id);
  if (!cursor) throw new CommandError(43, `cursor id ${id} not found`);
  let batch;
  try {
    const failure = context.server.failPoints.fire('failGetMoreAfterCursorCheckout', () => true);
    if (failure) {
      const code = Number(failure.errorCode ?? 1);
      throw new CommandError(
        code,
        "Failing getMore via 'failGetMoreAfterCursorCheckout' failpoint",
      );
    }
    batch = await cursor.nextBatch(context, toNumber(context.command.batchSize));
  } catch (error) {
    context.server.cursors.remove(id);
    throw error;
  }
  if (batch.exhausted) context.server.cursors.remove(id);
  return cursorReply(id, cursor.ns, 'nextBatch', batch);
};

const killCursors: CommandHandler = (context) => {
  const ids = ((context.command.cursors as unknown[]) ?? []).map((id) => toNumber(id) ?? 0);
  const killed: Long[] = [];
  const notFound: Long[] = [];
  for (const id of ids)
    (context.server.cursors.remove(id) ? killed : notFound).push(Long.fromNumber(id));
  return {
    cursorsKilled: killed,
    cursorsNotFound: notFound,
    cursorsAlive: [],
    cursorsUnknown: [],
    ok: 1,
  };
};

const count: CommandHandler = (context) => {
  const { command } = context;
  const collection = readableCollection(
    context.storage,
    context.db,
    context.collectionName,
    context.mingo,
  );
  let n = selectDocuments(collection, (command.query as Document) ?? {}, context.mingo).length;
  const skip = toNumber(command.skip) ?? 0;
  const limit = Math.abs(toNumber(command.limit) ?? 0);
  n = Math.max(0, n - skip);
  if (limit > 0) n = Math.min(n, limit);
  return { n, ok: 1 };
};

const distinct: CommandHandler = (context) => {
  const { command } = context;
  const key = command.key;
  if (typeof key !== 'string')
    throw new CommandError(14, "BSON field 'distinct.key' is missing but a required field");
  const collection = readableCollection(
    context.storage,
    context.db,
    context.collectionName,
    context.mingo,
  );
  const documents = selectDocuments(collection, (command.query as Document) ?? {}, context.mingo);
  const seen = new Map<string, unknown>();
  const compare = context.mingo.collation ? collator(context.mingo.collation) : undefined;
  const strings: string[] = [];
  for (const document of documents) {
    for (const value of valuesForDistinct(document, key)) {
      if (compare && typeof value === 'string') {
        // Under a collation, strings it deems equal are one value (the first seen).
        if (!strings.some((other) => compare.compare(other, value) === 0)) strings.push(value);
        continue;
      }
      const canonical = canonicalKey(value);
      if (!seen.has(canonical)) seen.set(canonical, value);
    }
  }
  return { values: [...seen.values(), ...strings], ok: 1 };
};

/** distinct unwinds arrays at the end of the path (and along it), skips missing values. */
function valuesForDistinct(document: unknown, path: string): unknown[] {
  const [head, ...rest] = path.split('.');
  if (Array.isArray(document)) return document.flatMap((item) => valuesForDistinct(item, path));
  if (!document || typeof document !== 'object') return [];
  const value: unknown = (document as Document)[head];
  if (value === undefined) return [];
  if (rest.length === 0) return Array.isArray(value) ? value : [value];
  return valuesForDistinct(value, rest.join('.'));
}

export const readCommands: Record<string, CommandHandler> = {
  find,
  getmore: getMore,
  killcursors: killCursors,
  count,
  distinct,
};
