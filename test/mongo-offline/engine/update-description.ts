import type { Document } from 'bson';
import { canonicalKey } from './bson-values';

export interface UpdateDescription {
  updatedFields: Document;
  removedFields: string[];
  truncatedArrays: Array<{ field: string; newSize: number }>;
}

export function isPlainObject(value: unknown): value is Document {
  return (
    !!value &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    !(value instanceof Date) &&
    !(value instanceof RegExp) &&
    !('_bsontype' in value)
  );
}

/**
 * The delta a change stream reports for an update, computed from the before and after
 * images the way MongoDB's v2 oplog diffs describe it: embedded documents are descended
 * into, arrays report changed or appended elements by index and shrinking as truncation.
 */
export function describeUpdate(before: Document, after: Document): UpdateDescription {
  const description: UpdateDescription = {
    updatedFields: {},
    removedFields: [],
    truncatedArrays: [],
  };
  diffObjects(before, after, '', description);
  return description;
}

export function same(a: unknown, b: unknown): boolean {
  return canonicalKey(a) === canonicalKey(b) && typeOfValue(a) === typeOfValue(b);
}

function typeOfValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

export function diffObjects(
  before: Document,
  after: Document,
  prefix: string,
  out: UpdateDescription,
): void {
  for (const key of Object.keys(before)) {
    if (!(key in after)) out.removedFields.push(prefix + key);
  }
  for (const [key, value] of Object.entries(after)) {
    const path = prefix + key;
    if (!(key in before)) {
      out.updatedFields[path] = value;
      continue;
    }
    const old: unknown = before[key];
    if (same(old, value)) continue;
    if (isPlainObject(old) && isPlainObject(value) && sameKeyOrderPrefix(old, value)) {
      diffObjects(old, value, `${path}.`, out);
    } else if (Array.isArray(old) && Array.isArray(value)) {
      diffArrays(old, value, path, out);
    } else {
      out.updatedFields[path] = value;
    }
  }
}

/** A reordered embedded document is reported whole, as MongoDB does. */
function sameKeyOrderPrefix(before: Document, after: Document): boolean {
  const kept = Object.keys(before).filter((key) => key in after);
  const order = Object.keys(after).filter((key) => key in before);
  return kept.every((key, i) => order[i] === key);
}

export function diffArrays(
  before: unknown[],
  after: unknown[],
  path: string,
  out: UpdateDescription,
): void {
  if (after.length < before.length)
    out.truncatedArrays.push({ field: path, newSize: after.length });
  after.forEach((value, i) => {
    if (i >= before.length) {
      out.updatedFields[`${path}.${i}`] = value;
      return;
    }
    const old = before[i];
    if (same(old, value)) return;
    if (isPlainObject(old) && isPlainObject(value) && sameKeyOrderPrefix(old, value)) {
      diffObjects(old, value, `${path}.${i}.`, out);
    } else {
      out.updatedFields[`${path}.${i}`] = value;
    }
  });
}
