import type { Document } from 'bson';
import { evalExpr } from 'mingo/core';
import { type Iterator, Lazy } from 'mingo/lazy';
import { $sortArray as mingoSortArray } from 'mingo/operators/expression';
import { $sort as mingoSort } from 'mingo/operators/pipeline';
import type { AnyObject, Options, SortSpec } from 'mingo/types';
import * as mingoUtil from 'mingo/util';
import { compareValues } from './value-order';

const { assert, groupBy, isObject, resolve } = mingoUtil;

/**
 * Sorts `documents` (in place) by `sortKeys` as mingo's `$sort` does (by each key from the
 * last to the first, documents grouped by their value at the key, groups in order, reversed
 * for -1), with the server's order of values (value-order.ts: strings by code point, decimals
 * by value) instead of mingo's `compare`.
 */
function sortInPlace(documents: Document[], sortKeys: SortSpec): Document[] {
  for (const key of Object.keys(sortKeys).reverse()) {
    const groups = groupBy(documents, (document) => resolve(document, key));
    const keys = Array.from(groups.keys());
    if (keys.every((value): value is number => typeof value === 'number' && !Number.isNaN(value))) {
      // All numbers (no NaN): mingo's own sort for them.
      const numbers = new Float64Array(keys).sort();
      for (let i = 0; i < numbers.length; i++) keys[i] = numbers[i];
    } else {
      keys.sort(compareValues);
    }
    if (sortKeys[key] === -1) keys.reverse();
    let i = 0;
    for (const value of keys)
      for (const document of groups.get(value) ?? []) documents[i++] = document;
    assert(i === documents.length, 'bug: counter must match collection size.');
  }
  return documents;
}

/**
 * The `$sort` stage (and a find's or findAndModify's sort). Under a collation mingo's own,
 * which compares strings with `Intl.Collator`; otherwise as MongoDB, in code point order.
 */
export function $sort(collection: Iterator, sortKeys: SortSpec, options: Options): Iterator {
  if (options.collation) return mingoSort(collection, sortKeys, options);
  assert(isObject(sortKeys) && Object.keys(sortKeys).length > 0, '$sort specification is invalid');
  return collection.transform((documents) => Lazy(sortInPlace(documents as Document[], sortKeys)));
}

/** Sorts a copy with MongoDB's cross-type ordering. */
export function sortDocuments(
  documents: Document[],
  sort: Document | undefined,
  options: Partial<Options>,
): Document[] {
  if (!sort || Object.keys(sort).length === 0) return documents;
  return $sort(Lazy(documents), sort, options as Options).collect<Document>();
}

/**
 * The `$sortArray` expression: mingo's, with the order of `$sort` above (by a field) or of
 * `compareValues` (whole elements). Under a collation, and for its errors, mingo's own.
 */
export function $sortArray(obj: AnyObject, expr: unknown, options: Options): unknown {
  const mingo = (argument: unknown): unknown =>
    mingoSortArray(obj, argument as Parameters<typeof mingoSortArray>[1], options);
  if (options.collation || !isObject(expr) || !('input' in expr) || !('sortBy' in expr)) {
    return mingo(expr);
  }
  const { input, sortBy } = evalExpr(obj, expr, options) as { input: unknown; sortBy: unknown };
  if (!Array.isArray(input)) {
    return mingo({ input: { $literal: input }, sortBy: { $literal: sortBy } });
  }
  if (isObject(sortBy)) return $sort(Lazy(input), sortBy as SortSpec, options).collect();
  const result = input.slice().sort(compareValues);
  if (sortBy === -1) result.reverse();
  return result;
}
