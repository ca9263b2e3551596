import type { Document } from 'bson';
import { Query } from 'mingo/query';
import type { Options } from 'mingo/types';
import { CommandError, badValue } from '../commands/errors';
import { canonicalKey } from './bson-values';
import type { Collection } from './collection';
import { bindFilterVariables } from './system-variables';
import { applyCollationToFilter } from './collation';

function isPlainValue(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return true;
  if (value instanceof Date || Array.isArray(value)) return true;
  if ('_bsontype' in value) return true;
  const keys = Object.keys(value);
  return keys.length === 0 || !keys[0].startsWith('$');
}

/** The `_id` values a filter pins down by equality, or undefined when it does not. */
function idCandidates(filter: Document): unknown[] | undefined {
  if (!('_id' in filter)) return undefined;
  const condition: unknown = filter._id;
  if (condition instanceof RegExp) return undefined;
  if (isPlainValue(condition)) return Array.isArray(condition) ? undefined : [condition];
  const operators = condition as Document;
  const keys = Object.keys(operators);
  if (
    keys.length === 1 &&
    keys[0] === '$eq' &&
    isPlainValue(operators.$eq) &&
    !Array.isArray(operators.$eq)
  ) {
    return [operators.$eq];
  }
  if (keys.length === 1 && keys[0] === '$in' && Array.isArray(operators.$in)) {
    const values = operators.$in as unknown[];
    // Several values would come back in $in order, not natural order: scan instead.
    if (
      values.length <= 1 &&
      values.every(
        (value) => isPlainValue(value) && !Array.isArray(value) && !(value instanceof RegExp),
      )
    )
      return values;
  }
  return undefined;
}

const TOP_LEVEL_OPERATORS = new Set([
  '$and',
  '$or',
  '$nor',
  '$expr',
  '$where',
  '$text',
  '$comment',
  '$jsonSchema',
  '$alwaysTrue',
  '$alwaysFalse',
  '$sampleRate',
]);

/** MongoDB rejects unknown `$` keys at the top of a filter (mingo ignores them on no input). */
function assertKnownTopLevelOperators(filter: Document): void {
  for (const [key, value] of Object.entries(filter)) {
    if (!key.startsWith('$')) continue;
    if (!TOP_LEVEL_OPERATORS.has(key))
      throw badValue(
        `unknown top level operator: ${key}. If you are trying to match on a field name that starts with '$', use $getField.`,
      );
    if ((key === '$and' || key === '$or' || key === '$nor') && Array.isArray(value)) {
      for (const clause of value)
        if (clause && typeof clause === 'object') assertKnownTopLevelOperators(clause as Document);
    }
  }
}

export function compileFilter(filter: Document, options: Partial<Options>): Query {
  if (!filter || typeof filter !== 'object' || Array.isArray(filter)) {
    throw new CommandError(14, "BSON field 'filter' is the wrong type, expected type 'object'");
  }
  assertKnownTopLevelOperators(filter);
  try {
    const bound = bindFilterVariables(filter, options.variables ?? {});
    return new Query(applyCollationToFilter(bound, options.collation), options);
  } catch (error) {
    throw badValue(error instanceof Error ? error.message : String(error));
  }
}

function safeTest(query: Query, document: Document): boolean {
  try {
    return query.test(document);
  } catch (error) {
    throw badValue(error instanceof Error ? error.message : String(error));
  }
}

/**
 * The string of a filter that is exactly `{_id: <string>}`, under no collation. The `_id`
 * map answers it completely: the document stored under that string's canonical key has that
 * very string as `_id`, which mingo's `$eq` would match, so no Query needs compiling (and
 * such a filter has nothing to validate).
 */
function plainStringId(filter: Document, options: Partial<Options>): string | undefined {
  if (!filter || typeof filter !== 'object' || Array.isArray(filter) || options.collation) {
    return undefined;
  }
  let id: unknown;
  let count = 0;
  for (const key in filter) {
    if (!Object.prototype.hasOwnProperty.call(filter, key)) continue;
    if (key !== '_id' || ++count > 1) return undefined;
    id = filter[key];
  }
  return typeof id === 'string' ? id : undefined;
}

/**
 * Documents matching `filter` in natural order. An `_id` equality (or `$in`) is answered
 * from the `_id` map: a lock hammering one key never scans the collection.
 */
export function selectDocuments(
  collection: Collection | undefined,
  filter: Document,
  options: Partial<Options>,
  limit = 0,
): Document[] {
  const stringId = plainStringId(filter, options);
  if (stringId !== undefined) {
    const document = collection?.documents.get(canonicalKey(stringId));
    return document ? [document] : [];
  }
  // The filter is parsed even for a missing collection: a bad operator fails either way.
  const query = compileFilter(filter ?? {}, options);
  if (!collection) return [];
  const ids = idCandidates(filter ?? {});
  const result: Document[] = [];
  if (ids) {
    const seen = new Set<string>();
    for (const id of ids) {
      const key = canonicalKey(id);
      if (seen.has(key)) continue;
      seen.add(key);
      const document = collection.documents.get(key);
      if (document && safeTest(query, document)) result.push(document);
    }
    return limit > 0 ? result.slice(0, limit) : result;
  }
  for (const document of collection.documents.values()) {
    if (safeTest(query, document)) {
      result.push(document);
      if (limit > 0 && result.length >= limit) break;
    }
  }
  return result;
}

export { sortDocuments } from './sort-stage';
