import type { Document } from 'bson';
import { Query } from 'mingo/query';
import { canonicalKey, formatForErrmsg, valuesAtPath } from './bson-values';

/** An index as listIndexes reports it. */
export interface IndexSpec {
  v: number;
  key: Document;
  name: string;
  unique?: boolean;
  sparse?: boolean;
  expireAfterSeconds?: number;
  partialFilterExpression?: Document;
  [option: string]: unknown;
}

/** MongoDB's default name: `a_1_b_-1`. */
export function defaultIndexName(key: Document): string {
  return Object.entries(key)
    .map(([field, direction]) => `${field}_${String(direction)}`)
    .join('_');
}

/** Values a document contributes for one field: array elements separately (multikey). */
function fieldKeyValues(document: Document, field: string): unknown[] {
  const raw = valuesAtPath(document, field);
  const values: unknown[] = [];
  for (const value of raw) {
    if (Array.isArray(value)) {
      if (value.length === 0) values.push(undefined);
      else values.push(...value);
    } else {
      values.push(value);
    }
  }
  const present = values.filter((value) => value !== undefined);
  return present.length > 0 ? present : [null];
}

function fieldIsMissing(document: Document, field: string): boolean {
  return valuesAtPath(document, field).every((value) => value === undefined);
}

export interface IndexKey {
  canonical: string;
  keyValue: Document;
}

/** The index keys (one per multikey combination) of a document, or none if it is not indexed. */
export function indexKeysOf(spec: IndexSpec, document: Document, partial?: Query): IndexKey[] {
  const fields = Object.keys(spec.key);
  if (spec.sparse && fields.every((field) => fieldIsMissing(document, field))) return [];
  if (partial && !partial.test(document)) return [];
  let combos: unknown[][] = [[]];
  for (const field of fields) {
    const values = fieldKeyValues(document, field);
    combos = combos.flatMap((prefix) => values.map((value) => [...prefix, value]));
  }
  const unique = new Map<string, IndexKey>();
  for (const combo of combos) {
    const keyValue: Document = {};
    fields.forEach((field, i) => (keyValue[field] = combo[i] ?? null));
    const canonical = combo.map(canonicalKey).join('|');
    unique.set(canonical, { canonical, keyValue });
  }
  return [...unique.values()];
}

export function duplicateKeyMessage(ns: string, indexName: string, keyValue: Document): string {
  const shown = Object.entries(keyValue)
    .map(([field, value]) => `${field}: ${formatForErrmsg(value)}`)
    .join(', ');
  return `E11000 duplicate key error collection: ${ns} index: ${indexName} dup key: { ${shown} }`;
}
