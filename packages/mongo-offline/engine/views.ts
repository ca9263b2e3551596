import type { Document } from 'bson';
import { Aggregator } from 'mingo/aggregator';
import type { Options } from 'mingo/types';
import { CommandError, badValue } from '../commands/errors';
import { canonicalKey } from './bson-values';
import { Collection } from './collection';
import type { DataStore } from './data-store';

export function isView(collection: Collection | undefined): boolean {
  return typeof collection?.options.viewOn === 'string';
}

/**
 * What a read sees under `name`: the collection itself, or for a view (`create` with
 * `viewOn` + `pipeline`) a throw-away collection holding the view's current result.
 */
export function readableCollection(
  store: DataStore,
  db: string,
  name: string,
  options: Partial<Options>,
  depth = 0,
): Collection | undefined {
  const collection = store.getCollection(db, name);
  if (!collection || !isView(collection)) return collection;
  if (depth > 20) throw new CommandError(2, 'View nesting too deep or cyclic');
  const source = readableCollection(
    store,
    db,
    String(collection.options.viewOn),
    options,
    depth + 1,
  );
  const pipeline = (collection.options.pipeline as Document[] | undefined) ?? [];
  let results: Document[];
  try {
    results = new Aggregator(pipeline, options).run<Document>([
      ...(source?.documents.values() ?? []),
    ]);
  } catch (error) {
    throw badValue(error instanceof Error ? error.message : String(error));
  }
  const materialised = new Collection(db, name, collection.options, collection.uuid);
  results.forEach((document, position) => {
    const key = canonicalKey(document._id);
    materialised.documents.set(materialised.documents.has(key) ? `#${position}` : key, document);
  });
  return materialised;
}

export function assertNotView(collection: Collection | undefined): void {
  if (isView(collection)) {
    throw new CommandError(166, `Namespace ${collection!.ns} is a view, not a collection`);
  }
}
