import { type Document, Long } from 'bson';
import { canonicalKey } from '../engine/bson-values';
import { ID_INDEX } from '../engine/collection';
import { type IndexSpec, defaultIndexName } from '../engine/index-keys';
import type { Collection } from '../engine/collection';
import type { CommandHandler } from './context';
import { CommandError } from './errors';
import { assertWritablePrimary, requireArray } from './guards';

const DISTINGUISHING_OPTIONS = ['partialFilterExpression', 'collation'];
const COMPARED_OPTIONS = [
  'unique',
  'sparse',
  'expireAfterSeconds',
  'partialFilterExpression',
  'collation',
  'hidden',
];

function describeSpec(spec: IndexSpec): string {
  return JSON.stringify(spec).replace(/"(\w+)":/g, '$1: ');
}

function optionsOf(spec: Document, names: string[]): string {
  return names
    .map((name) =>
      canonicalKey(
        name === 'unique' || name === 'sparse' || name === 'hidden'
          ? spec[name] === true
          : spec[name],
      ),
    )
    .join('|');
}

function normaliseSpec(raw: Document): IndexSpec {
  if (!raw.key || typeof raw.key !== 'object' || Object.keys(raw.key as Document).length === 0) {
    throw new CommandError(
      9,
      "Error in specification { } :: caused by :: The 'key' field is a required property of an index specification",
    );
  }
  const key = raw.key as Document;
  const spec: IndexSpec = {
    v: 2,
    key,
    name: typeof raw.name === 'string' ? raw.name : defaultIndexName(key),
  };
  for (const [option, value] of Object.entries(raw)) {
    if (option !== 'key' && option !== 'name' && option !== 'v' && option !== 'ns')
      spec[option] = value;
  }
  if (spec.expireAfterSeconds !== undefined) {
    const seconds = Number(spec.expireAfterSeconds);
    if (!Number.isFinite(seconds) || seconds < 0 || seconds > 2147483647) {
      throw new CommandError(
        67,
        `TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number`,
      );
    }
    if (Object.keys(key).length > 1)
      throw new CommandError(
        67,
        'TTL indexes are single-field indexes, compound indexes do not support TTL',
      );
  }
  return spec;
}

/** true: an identical index exists (no-op); throws 85/86 on the conflicts MongoDB rejects. */
function existsOrConflicts(collection: Collection, spec: IndexSpec): boolean {
  for (const existing of collection.indexes) {
    const sameKey = canonicalKey(existing.key) === canonicalKey(spec.key);
    if (existing.name === spec.name) {
      if (!sameKey) {
        throw new CommandError(
          86,
          `An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: ${describeSpec(spec)}, existing index: ${describeSpec(existing)}`,
        );
      }
      if (existing.name === '_id_') return true;
      if (optionsOf(existing, COMPARED_OPTIONS) !== optionsOf(spec, COMPARED_OPTIONS)) {
        throw new CommandError(
          85,
          `An equivalent index already exists with the same name but different options. Requested index: ${describeSpec(spec)}, existing index: ${describeSpec(existing)}`,
        );
      }
      return true;
    }
    if (
      sameKey &&
      optionsOf(existing, DISTINGUISHING_OPTIONS) === optionsOf(spec, DISTINGUISHING_OPTIONS)
    ) {
      if (optionsOf(existing, COMPARED_OPTIONS) === optionsOf(spec, COMPARED_OPTIONS)) {
        throw new CommandError(85, `Index already exists with a different name: ${existing.name}`);
      }
      throw new CommandError(
        85,
        `An existing index has the same name as the requested index... Requested index: ${describeSpec(spec)}, existing index: ${describeSpec(existing)}`,
      );
    }
  }
  return false;
}

const createIndexes: CommandHandler = (context) => {
  assertWritablePrimary(context);
  const specs = requireArray(context.command.indexes, 'createIndexes.indexes').map((raw) =>
    normaliseSpec(raw as Document),
  );
  const createdCollectionAutomatically = !context.storage.getCollection(
    context.db,
    context.collectionName,
  );
  const collection = context.storage.ensureCollection(context.db, context.collectionName);
  const numIndexesBefore = collection.indexes.length;
  const toCreate = specs.filter((spec) => !existsOrConflicts(collection, spec));
  for (const spec of toCreate) context.storage.addIndex(collection, spec);
  const reply: Document = {
    numIndexesBefore,
    numIndexesAfter: collection.indexes.length,
    createdCollectionAutomatically,
  };
  if (toCreate.length === 0) reply.note = 'all indexes already exist';
  reply.ok = 1;
  return reply;
};

const listIndexes: CommandHandler = (context) => {
  const collection = context.storage.getCollection(context.db, context.collectionName);
  if (!collection) throw new CommandError(26, `ns does not exist: ${context.ns}`);
  return {
    cursor: {
      id: Long.ZERO,
      ns: context.ns,
      firstBatch: collection.indexes.map((spec) => ({ ...spec })),
    },
    ok: 1,
  };
};

function indexNamesToDrop(collection: Collection, selector: unknown): string[] {
  if (selector === '*')
    return collection.indexes.filter((spec) => spec.name !== '_id_').map((spec) => spec.name);
  const names = Array.isArray(selector) ? selector : [selector];
  return names.map((entry: unknown) => {
    const found =
      typeof entry === 'string'
        ? collection.indexes.find((spec) => spec.name === entry)
        : collection.indexes.find((spec) => canonicalKey(spec.key) === canonicalKey(entry));
    if (!found) {
      const shown =
        typeof entry === 'string'
          ? `with name [${entry}]`
          : `with key pattern ${JSON.stringify(entry)}`;
      throw new CommandError(27, `index not found ${shown}`);
    }
    if (found.name === ID_INDEX.name) throw new CommandError(72, 'cannot drop _id index');
    return found.name;
  });
}

const dropIndexes: CommandHandler = (context) => {
  assertWritablePrimary(context);
  const collection = context.storage.getCollection(context.db, context.collectionName);
  if (!collection) throw new CommandError(26, `ns not found ${context.ns}`);
  const nIndexesWas = collection.indexes.length;
  for (const name of indexNamesToDrop(collection, context.command.index)) {
    context.storage.dropIndex(collection, name);
  }
  return { nIndexesWas, ok: 1 };
};

/** collMod on an index: change its `expireAfterSeconds` (or `hidden`), as the lock TTL may. */
const collMod: CommandHandler = (context) => {
  assertWritablePrimary(context);
  const collection = context.storage.getCollection(context.db, context.collectionName);
  if (!collection) throw new CommandError(26, `ns does not exist: ${context.ns}`);
  const images: unknown = context.command.changeStreamPreAndPostImages;
  if (images && typeof images === 'object')
    collection.options.changeStreamPreAndPostImages = images;
  const change = context.command.index as Document | undefined;
  if (!change) return { ok: 1 };
  const spec = collection.indexes.find((index) =>
    typeof change.name === 'string'
      ? index.name === change.name
      : canonicalKey(index.key) === canonicalKey(change.keyPattern),
  );
  if (!spec)
    throw new CommandError(
      27,
      'cannot find index ' +
        JSON.stringify(change.name ?? change.keyPattern) +
        ' for ns ' +
        context.ns,
    );
  const reply: Document = {};
  for (const option of ['expireAfterSeconds', 'hidden'] as const) {
    if (change[option] === undefined) continue;
    reply[`${option}_old`] = spec[option];
    reply[`${option}_new`] = change[option];
    spec[option] = change[option];
  }
  return { ...reply, ok: 1 };
};

export const indexCommands: Record<string, CommandHandler> = {
  collmod: collMod,
  createindexes: createIndexes,
  listindexes: listIndexes,
  dropindexes: dropIndexes,
  deleteindexes: dropIndexes,
};
