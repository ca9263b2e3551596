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

/** Equal canonical keys (bson-values.ts) and the same JavaScript type at the top. */
export function same(a: unknown, b: unknown): boolean {
  return typeOfValue(a) === typeOfValue(b) && canonicallyEqual(a, b);
}

/**
 * `canonicalKey(a) === canonicalKey(b)` without building the keys for the values a lock
 * document holds (numbers, strings, dates, arrays and plain objects of them): a change event's
 * delta compares every field of the document before and after on every update. Any other pair
 * (BSON classes, a number against a Long...) is compared by its keys.
 */
function canonicallyEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  const typeA = typeof a;
  const typeB = typeof b;
  if (typeA === 'number' && typeB === 'number') return Number.isNaN(a) && Number.isNaN(b);
  if (typeA === 'string' && typeB === 'string') return false;
  if (typeA === 'boolean' && typeB === 'boolean') return false;
  if (isNullish(a) && isNullish(b)) return true;
  if (a instanceof Date && b instanceof Date) {
    const timeA = a.getTime();
    const timeB = b.getTime();
    return timeA === timeB || (Number.isNaN(timeA) && Number.isNaN(timeB));
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!canonicallyEqual(a[i], b[i])) return false;
    return true;
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keysA = Object.keys(a);
    const keysB = Object.keys(b);
    if (keysA.length !== keysB.length) return false;
    for (let i = 0; i < keysA.length; i++) {
      if (keysA[i] !== keysB[i] || !canonicallyEqual(a[keysA[i]], b[keysB[i]])) return false;
    }
    return true;
  }
  return canonicalKey(a) === canonicalKey(b);
}

const isNullish = (value: unknown): boolean => value === null || value === undefined;

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
