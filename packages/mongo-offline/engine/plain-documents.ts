import type { Document } from 'bson';

/**
 * Copying and comparing "plain" documents without BSON: strings, numbers, booleans, null,
 * valid dates, plain objects and arrays, at most {@link MAX_PLAIN_DEPTH} deep (every lock
 * document). The results are exactly those of the BSON round trip and of comparing BSON bytes
 * (`bson-values.ts`); anything these functions are not sure of is left to BSON.
 */

/** What {@link copyPlain} returns for a value it leaves to BSON. */
export const NOT_PLAIN = Symbol('not plain');

/** MongoDB nests documents at most 100 deep; deeper (or cyclic) values are left to BSON. */
const MAX_PLAIN_DEPTH = 100;

/** A lone surrogate, which UTF-8 encoding turns into U+FFFD. */
const LONE_SURROGATE = /\p{Cs}/u;

/** A string UTF-8 keeps as it is. */
function plainString(value: string): boolean {
  return !LONE_SURROGATE.test(value);
}

/** A key BSON keeps as it is, which js-bson and JS treat as an ordinary field name. */
function plainKey(key: string): boolean {
  return (
    key !== '_bsontype' &&
    key !== '__proto__' &&
    !key.includes('\0') &&
    plainString(key) &&
    // `$ref` / `$id` and the like: a decoder may read them as a DBRef.
    key.charCodeAt(0) !== 0x24
  );
}

type PlainKind = 'string' | 'number' | 'boolean' | 'null' | 'date' | 'array' | 'object';

/** The kind of a plain value; undefined for anything else (undefined itself included). */
function plainKind(value: unknown): PlainKind | undefined {
  switch (typeof value) {
    case 'string':
      return plainString(value) ? 'string' : undefined;
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'object':
      break;
    default:
      return undefined;
  }
  if (value === null) return 'null';
  // js-bson serializes these its own way, wherever they are (own, inherited, hidden).
  if ('toBSON' in value || '_bsontype' in value) return undefined;
  if (Array.isArray(value)) return 'array';
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === Object.prototype) return 'object';
  if (prototype === Date.prototype && !Number.isNaN((value as Date).getTime())) return 'date';
  return undefined;
}

/**
 * What the BSON round trip makes of `value`: the same primitives (a number keeps its value,
 * -0 and NaN included), a new Date, copies of plain objects without their undefined fields,
 * and of arrays with undefined (or holes) as null. {@link NOT_PLAIN} for anything else.
 */
export function copyPlain(value: unknown, depth = 0): unknown {
  const kind = plainKind(value);
  switch (kind) {
    case undefined:
      return NOT_PLAIN;
    case 'date':
      return new Date((value as Date).getTime());
    case 'array':
    case 'object':
      return depth >= MAX_PLAIN_DEPTH ? NOT_PLAIN : copyContainer(value as Document, kind, depth);
    default:
      return value;
  }
}

function copyContainer(value: Document, kind: 'array' | 'object', depth: number): unknown {
  if (kind === 'array') {
    const items = value as unknown[];
    const copy: unknown[] = new Array<unknown>(items.length);
    for (let i = 0; i < items.length; i++) {
      const item = items[i] === undefined ? null : copyPlain(items[i], depth + 1);
      if (item === NOT_PLAIN) return NOT_PLAIN;
      copy[i] = item;
    }
    return copy;
  }
  const copy: Document = {};
  for (const key of Object.keys(value)) {
    if (!plainKey(key)) return NOT_PLAIN;
    const field: unknown = value[key];
    if (field === undefined) continue;
    const fieldCopy = copyPlain(field, depth + 1);
    if (fieldCopy === NOT_PLAIN) return NOT_PLAIN;
    copy[key] = fieldCopy;
  }
  return copy;
}

/**
 * Whether two documents serialize to the same BSON bytes, or undefined when either is not
 * plain throughout (then only BSON can say, or throw what it throws). NaN counts as not plain:
 * NaNs differ by sign and payload bits, which only the bytes show.
 */
export function samePlainDocuments(a: Document, b: Document): boolean | undefined {
  if (!comparable(a, 0) || !comparable(b, 0)) return undefined;
  return samePlain(a, b);
}

/** Plain throughout, with no undefined (which BSON drops or turns into null) and no NaN. */
function comparable(value: unknown, depth: number): boolean {
  const kind = plainKind(value);
  if (kind === undefined) return false;
  if (kind === 'number') return !Number.isNaN(value);
  if (kind !== 'array' && kind !== 'object') return true;
  if (depth >= MAX_PLAIN_DEPTH) return false;
  if (kind === 'array') {
    const items = value as unknown[];
    for (let i = 0; i < items.length; i++) if (!comparable(items[i], depth + 1)) return false;
    return true;
  }
  for (const key of Object.keys(value as Document)) {
    if (!plainKey(key) || !comparable((value as Document)[key], depth + 1)) return false;
  }
  return true;
}

/**
 * Equal BSON bytes, for two {@link comparable} values: the same kind (each kind is its own
 * BSON type, and a number's type follows from its value: -0 is a double, 0 an int32), and
 * the same value, fields (in order) or elements.
 */
function samePlain(a: unknown, b: unknown): boolean {
  const kind = plainKind(a);
  if (kind !== plainKind(b)) return false;
  switch (kind) {
    case 'date':
      return (a as Date).getTime() === (b as Date).getTime();
    case 'array': {
      const left = a as unknown[];
      const right = b as unknown[];
      if (left.length !== right.length) return false;
      for (let i = 0; i < left.length; i++) if (!samePlain(left[i], right[i])) return false;
      return true;
    }
    case 'object': {
      const leftKeys = Object.keys(a as Document);
      const rightKeys = Object.keys(b as Document);
      if (leftKeys.length !== rightKeys.length) return false;
      for (let i = 0; i < leftKeys.length; i++) {
        if (leftKeys[i] !== rightKeys[i]) return false;
        if (!samePlain((a as Document)[leftKeys[i]], (b as Document)[rightKeys[i]])) return false;
      }
      return true;
    }
    default:
      return Object.is(a, b);
  }
}
