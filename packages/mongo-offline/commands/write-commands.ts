import { type Document, ObjectId } from 'bson';
import { assertNotView } from '../engine/views';
import { idFirst } from '../engine/apply-update';
import { selectDocuments } from '../engine/select';
import { withStatementCollation } from '../engine/mingo-options';
import type { CommandContext, CommandHandler } from './context';
import { CommandError } from './errors';
import { assertWritablePrimary, requireArray } from './guards';
import { afterTransactions } from './transaction-waits';
import { runUpdate } from './update-operation';

function writeErrorOf(index: number, error: unknown): Document {
  if (error instanceof CommandError) {
    return { index, code: error.code, ...error.extra, errmsg: error.message };
  }
  return { index, code: 1, errmsg: error instanceof Error ? error.message : String(error) };
}

/**
 * Errors that fail the whole command rather than one statement: a transaction's write conflict
 * (labelled for retry) and, as on a mongod, interruptions (maxTimeMS, a step-down).
 */
const FAILS_THE_BATCH = new Set([112, 50, 11602]);

/**
 * Runs each item; ordered writes stop at the first error, as MongoDB's batch writes do. An item
 * that meets a document an open transaction wrote waits for it (`afterTransactions`).
 */
async function runBatch(
  context: CommandContext,
  items: unknown[],
  run: (item: Document, index: number) => void,
): Promise<Document[]> {
  const ordered = context.command.ordered !== false;
  const writeErrors: Document[] = [];
  for (let index = 0; index < items.length; index++) {
    try {
      await afterTransactions(context, () => run(items[index] as Document, index));
    } catch (error) {
      if (error instanceof CommandError && FAILS_THE_BATCH.has(error.code)) throw error;
      writeErrors.push(writeErrorOf(index, error));
      if (ordered) break;
    }
  }
  return writeErrors;
}

function withWriteErrors(reply: Document, writeErrors: Document[]): Document {
  if (writeErrors.length > 0) reply.writeErrors = writeErrors;
  return reply;
}

const insert: CommandHandler = async (context) => {
  assertWritablePrimary(context);
  const documents = requireArray(context.command.documents, 'insert.documents');
  assertNotView(context.storage.ensureCollection(context.db, context.collectionName));
  let n = 0;
  const writeErrors = await runBatch(context, documents, (document) => {
    // Looked up again for each document: a wait for a transaction may outlast the collection.
    const collection = context.storage.ensureCollection(context.db, context.collectionName);
    // Top-level `$` field names are allowed since MongoDB 5.0, but not inside `_id`.
    const id: unknown = document._id;
    if (
      id &&
      typeof id === 'object' &&
      !Array.isArray(id) &&
      !('_bsontype' in id) &&
      !(id instanceof Date)
    ) {
      const dollar = Object.keys(id).find((key) => key.startsWith('$'));
      if (dollar)
        throw new CommandError(
          52,
          `_id fields may not contain '$'-prefixed fields: ${dollar} is not valid for storage.`,
        );
    }
    if (Array.isArray(document._id)) throw new CommandError(2, "can't use an array for _id");
    const stored = idFirst(
      document._id === undefined ? { _id: new ObjectId(), ...document } : document,
    );
    context.storage.insert(collection, stored, context.origin);
    n += 1;
  });
  return withWriteErrors({ n, ok: 1 }, writeErrors);
};

const update: CommandHandler = async (context) => {
  assertWritablePrimary(context);
  const updates = requireArray(context.command.updates, 'update.updates');
  let n = 0;
  let nModified = 0;
  const upserted: Document[] = [];
  if (updates.some((statement) => (statement as Document).sort !== undefined)) {
    // MongoDB 7.0 (what hello reports) has no sort in update statements; 8.0 added it.
    throw new CommandError(40415, "BSON field 'update.updates.sort' is an unknown field.");
  }
  const writeErrors = await runBatch(context, updates, (statement, index) => {
    if (statement.u === undefined)
      throw new CommandError(
        40414,
        "BSON field 'update.updates.u' is missing but a required field",
      );
    const outcome = runUpdate(context, context.collectionName, {
      filter: (statement.q as Document) ?? {},
      update: statement.u as Document,
      multi: statement.multi === true,
      upsert: statement.upsert === true,
      arrayFilters: statement.arrayFilters as Document[] | undefined,
      sort: statement.sort as Document | undefined,
      collation: statement.collation as Document | undefined,
    });
    if (outcome.upsertedId !== undefined) {
      upserted.push({ index, _id: outcome.upsertedId });
      n += 1;
    } else {
      n += outcome.matched;
      nModified += outcome.modified;
    }
  });
  const reply: Document = { n, nModified };
  if (upserted.length > 0) reply.upserted = upserted;
  reply.ok = 1;
  return withWriteErrors(reply, writeErrors);
};

const deleteCommand: CommandHandler = async (context) => {
  assertWritablePrimary(context);
  const deletes = requireArray(context.command.deletes, 'delete.deletes');
  assertNotView(context.storage.getCollection(context.db, context.collectionName));
  let n = 0;
  const writeErrors = await runBatch(context, deletes, (statement) => {
    // Looked up again for each statement: a wait for a transaction may outlast the collection.
    const collection = context.storage.getCollection(context.db, context.collectionName);
    if (statement.limit !== 0 && statement.limit !== 1) {
      throw new CommandError(
        9,
        `The limit field in delete objects must be 0 or 1. Got ${String(statement.limit)}`,
      );
    }
    const matches = selectDocuments(
      collection,
      (statement.q as Document) ?? {},
      withStatementCollation(context.mingo, statement.collation),
      statement.limit as number,
    );
    for (const document of matches) {
      context.storage.delete(collection!, document, context.origin);
      n += 1;
    }
  });
  return withWriteErrors({ n, ok: 1 }, writeErrors);
};

export const writeCommands: Record<string, CommandHandler> = {
  insert,
  update,
  delete: deleteCommand,
};
