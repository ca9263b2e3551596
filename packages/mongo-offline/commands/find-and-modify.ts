import type { Document } from 'bson';
import { assertNotView } from '../engine/views';
import { projectOne } from '../engine/project';
import { selectDocuments, sortDocuments } from '../engine/select';
import type { CommandContext, CommandHandler } from './context';
import { CommandError } from './errors';
import { assertWritablePrimary } from './guards';
import { afterTransactions } from './transaction-waits';
import { runUpdate } from './update-operation';

function removeOne(context: CommandContext, query: Document, sort: Document | undefined): Document {
  const { storage } = context;
  const collection = storage.getCollection(context.db, context.collectionName);
  assertNotView(collection);
  let matches = selectDocuments(collection, query, context.mingo, sort ? 0 : 1);
  if (sort) matches = sortDocuments(matches, sort, context.mingo);
  const target = matches[0];
  if (!target) return { lastErrorObject: { n: 0 }, value: null, ok: 1 };
  storage.delete(collection!, target, context.origin);
  return {
    lastErrorObject: { n: 1 },
    value: projectOne(target, context.command.fields as Document | undefined, context.mingo),
    ok: 1,
  };
}

/**
 * findAndModify: errors (E11000 included) are top-level command errors, not writeErrors. It
 * waits for an open transaction that wrote its document (`afterTransactions`).
 */
const findAndModify: CommandHandler = (context) =>
  afterTransactions(context, () => findAndModifyOnce(context));

function findAndModifyOnce(context: CommandContext): Document {
  assertWritablePrimary(context);
  const { command } = context;
  const query = (command.query as Document) ?? {};
  const sort = command.sort as Document | undefined;
  if (command.remove === true) {
    if (command.update !== undefined)
      throw new CommandError(9, 'Cannot specify both an update and remove=true');
    if (command.upsert === true)
      throw new CommandError(9, 'Cannot specify both upsert=true and remove=true');
    if (command.new === true)
      throw new CommandError(
        9,
        "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document",
      );
    return removeOne(context, query, sort);
  }
  if (command.update === undefined)
    throw new CommandError(9, 'Either an update or remove=true must be specified');
  const outcome = runUpdate(context, context.collectionName, {
    filter: query,
    update: command.update as Document,
    multi: false,
    upsert: command.upsert === true,
    arrayFilters: command.arrayFilters as Document[] | undefined,
    sort,
  });
  const lastErrorObject: Document = {
    n: outcome.upsertedId !== undefined ? 1 : outcome.matched,
    updatedExisting: outcome.matched > 0,
  };
  if (outcome.upsertedId !== undefined) lastErrorObject.upserted = outcome.upsertedId;
  const image =
    command.new === true
      ? outcome.after
      : outcome.upsertedId !== undefined
        ? undefined
        : outcome.before;
  const value = projectOne(image ?? null, command.fields as Document | undefined, context.mingo);
  return { lastErrorObject, value, ok: 1 };
}

export const findAndModifyCommands: Record<string, CommandHandler> = {
  findandmodify: findAndModify,
};
