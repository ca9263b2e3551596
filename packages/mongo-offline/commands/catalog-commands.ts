import { type Document, Long } from 'bson';
import { isView } from '../engine/views';
import { Query } from 'mingo/query';
import { MINGO_OPTIONS } from '../engine/mingo-options';
import type { CommandHandler } from './context';
import { CommandError } from './errors';
import { assertWritablePrimary } from './guards';

const create: CommandHandler = (context) => {
  assertWritablePrimary(context);
  if (context.storage.getCollection(context.db, context.collectionName)) {
    throw new CommandError(48, `Collection ${context.ns} already exists.`);
  }
  const { create: _name, $db: _db, lsid: _lsid, $clusterTime: _ct, ...options } = context.command;
  context.storage.ensureCollection(context.db, context.collectionName, options);
  return { ok: 1 };
};

const drop: CommandHandler = (context) => {
  assertWritablePrimary(context);
  const collection = context.storage.getCollection(context.db, context.collectionName);
  const nIndexesWas = collection?.indexes.length ?? 0;
  context.storage.dropCollection(context.db, context.collectionName);
  return { nIndexesWas, ns: context.ns, ok: 1 };
};

const dropDatabase: CommandHandler = (context) => {
  assertWritablePrimary(context);
  context.storage.dropDatabase(context.db);
  return { dropped: context.db, ok: 1 };
};

const listCollections: CommandHandler = (context) => {
  const collections = [...(context.storage.databases.get(context.db)?.values() ?? [])];
  let entries: Document[] = collections.map((collection) => ({
    name: collection.name,
    type: isView(collection) ? 'view' : 'collection',
    options: collection.options,
    info: { readOnly: false, uuid: collection.uuid },
    idIndex: { v: 2, key: { _id: 1 }, name: '_id_' },
  }));
  const filter = context.command.filter as Document | undefined;
  if (filter && Object.keys(filter).length > 0) {
    const query = new Query(filter, MINGO_OPTIONS);
    entries = entries.filter((entry) => query.test(entry));
  }
  if (context.command.nameOnly === true)
    entries = entries.map(({ name, type }) => ({ name, type }));
  return {
    cursor: { id: Long.ZERO, ns: `${context.db}.$cmd.listCollections`, firstBatch: entries },
    ok: 1,
  };
};

const listDatabases: CommandHandler = (context) => {
  const databases = [...context.storage.databases.keys()].map((name) => ({
    name,
    sizeOnDisk: 8192,
    empty: false,
  }));
  const filter = context.command.filter as Document | undefined;
  const query = filter ? new Query(filter, MINGO_OPTIONS) : undefined;
  const selected = query ? databases.filter((entry) => query.test(entry)) : databases;
  if (context.command.nameOnly === true)
    return { databases: selected.map(({ name }) => ({ name })), ok: 1 };
  return { databases: selected, totalSize: selected.length * 8192, totalSizeMb: 0, ok: 1 };
};

const renameCollection: CommandHandler = (context) => {
  assertWritablePrimary(context);
  const from = String(context.command.renameCollection);
  const to = String(context.command.to);
  const [fromDb, ...fromRest] = from.split('.');
  const [toDb, ...toRest] = to.split('.');
  const source = context.storage.getCollection(fromDb, fromRest.join('.'));
  if (!source) throw new CommandError(26, 'Source collection ' + from + ' does not exist');
  if (from === to) throw new CommandError(20, "Can't rename a collection to itself");
  context.storage.renameCollection(
    source,
    toDb,
    toRest.join('.'),
    context.command.dropTarget === true,
  );
  return { ok: 1 };
};

const collStats: CommandHandler = (context) => {
  const collection = context.storage.getCollection(context.db, context.collectionName);
  if (!collection) throw new CommandError(26, `ns not found ${context.ns}`);
  return {
    ns: context.ns,
    count: collection.documents.size,
    size: 0,
    nindexes: collection.indexes.length,
    ok: 1,
  };
};

export const catalogCommands: Record<string, CommandHandler> = {
  create,
  drop,
  dropdatabase: dropDatabase,
  listcollections: listCollections,
  listdatabases: listDatabases,
  renamecollection: renameCollection,
  collstats: collStats,
};
