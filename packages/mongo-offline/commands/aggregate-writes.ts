import type { Document } from 'bson';
import { Aggregator } from 'mingo/aggregator';
import { idFirst } from '../engine/apply-update';
import { canonicalKey } from '../engine/bson-values';
import { withOptions } from '../engine/mingo-options';
import { DuplicateKeyError } from '../engine/duplicate-key-error';
import type { CommandContext } from './context';
import { CommandError } from './errors';
import { assertWritablePrimary } from './guards';

function targetOf(
  context: CommandContext,
  target: unknown,
  field: 'coll' | 'into',
): { db: string; coll: string } {
  if (typeof target === 'string') return { db: context.db, coll: target };
  const spec = (target ?? {}) as Document;
  const coll = spec[field] ?? spec.coll;
  if (typeof coll !== 'string')
    throw new CommandError(9, `$merge / $out needs a target collection`);
  return { db: typeof spec.db === 'string' ? spec.db : context.db, coll };
}

/** `$out` as the last stage replaces the target collection with the results. */
export function writeOut(context: CommandContext, target: unknown, results: Document[]): void {
  assertWritablePrimary(context);
  const { db, coll } = targetOf(context, target, 'coll');
  const { storage } = context;
  const existing = storage.getCollection(db, coll);
  if (existing) {
    // It replaces the whole collection: before its first write, it waits for every open
    // transaction that wrote a document it deletes or one of the ids it inserts.
    const documents = [...existing.documents.values()];
    const ids = [...documents, ...results].map((document) => document._id);
    storage.assertUnlocked?.(existing, ids, context.origin);
    for (const document of documents) storage.delete(existing, document, context.origin);
  }
  const collection = storage.ensureCollection(db, coll);
  for (const document of results) storage.insert(collection, idFirst(document), context.origin);
}

/**
 * `$merge` as the last stage: each result is matched on `on` (default `_id`) and merged,
 * replaced, kept, failed or piped (`whenMatched`), or inserted, discarded or failed
 * (`whenNotMatched`).
 */
export function writeMerge(context: CommandContext, spec: unknown, results: Document[]): void {
  assertWritablePrimary(context);
  const options = (typeof spec === 'string' ? { into: spec } : (spec ?? {})) as Document;
  const { db, coll } = targetOf(context, options.into, 'coll');
  const on = (Array.isArray(options.on) ? options.on : [options.on ?? '_id']) as string[];
  const whenMatched: unknown = options.whenMatched ?? 'merge';
  const whenNotMatched: unknown = options.whenNotMatched ?? 'insert';
  const { storage } = context;
  const collection = storage.ensureCollection(db, coll);
  const keyOf = (document: Document) => on.map((field) => canonicalKey(document[field])).join('|');
  const matchOf = (result: Document) => {
    const key = keyOf(result);
    return [...collection.documents.values()].find((document) => keyOf(document) === key);
  };
  // Before its first write, it waits for every open transaction that wrote a document it
  // matches or one of the ids it may insert.
  const matched = results.map(matchOf).filter((document) => document !== undefined);
  const ids = [...matched, ...results].map((document) => document._id);
  storage.assertUnlocked?.(collection, ids, context.origin);
  for (const result of results) {
    const existing = matchOf(result);
    if (!existing) {
      if (whenNotMatched === 'fail')
        throw new CommandError(
          13113,
          '$merge could not find a matching document in the target collection for at least one document in the source collection',
        );
      if (whenNotMatched === 'insert') storage.insert(collection, idFirst(result), context.origin);
      continue;
    }
    if (whenMatched === 'keepExisting') continue;
    if (whenMatched === 'fail') {
      const keyPattern = Object.fromEntries(on.map((field) => [field, 1]));
      const keyValue = Object.fromEntries(on.map((field) => [field, result[field]]));
      const indexName = on.length === 1 && on[0] === '_id' ? '_id_' : on.join('_');
      throw new DuplicateKeyError(`${db}.${coll}`, indexName, keyPattern, keyValue);
    }
    let merged: Document;
    if (Array.isArray(whenMatched)) {
      const variables = {
        ...(context.mingo.variables ?? {}),
        new: result,
        ...((options.let as Document) ?? {}),
      };
      const pipelineOptions = withOptions(context.mingo, { variables });
      merged = new Aggregator(whenMatched as Document[], pipelineOptions).run<Document>([
        existing,
      ])[0];
    } else if (whenMatched === 'replace') {
      merged = { ...result, _id: existing._id };
    } else {
      merged = { ...existing, ...result, _id: existing._id };
    }
    // 'merge' is a `$set` of the result's fields: an operator update, never logged whole.
    const { _id: _ignored, ...fields } = result;
    const modifier = whenMatched === 'merge' ? { $set: fields } : undefined;
    storage.update(
      collection,
      existing,
      idFirst(merged),
      whenMatched === 'replace',
      context.origin,
      modifier,
    );
  }
}
