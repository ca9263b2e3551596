/* eslint-disable @typescript-eslint/no-base-to-string -- BSON classes (Long, Timestamp, Decimal128) define toString */
import { BSON, type Document } from 'bson';
import { decodeBson } from '../wire/bson-decoder';

/**
 * A deep copy that keeps BSON classes (structuredClone would drop ObjectId's prototype):
 * `BSON.deserialize(BSON.serialize(document), { promoteLongs: true })`, decoded by the
 * server's decoder (the same values; without UTF-8 validation, which bytes just encoded from
 * JavaScript strings always pass). Documents of plain values only (strings, numbers,
 * booleans, null, valid dates, plain objects and arrays: every lock document) are copied
 * directly, with the round trip's result; anything else takes the round trip.
 */
export function cloneDocument<T extends Document>(document: T): T {
  const copy = copyPlain(document);
  if (copy !== NOT_PLAIN) return copy as T;
  const bytes = BSON.serialize(document);
  return decodeBson(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)) as T;
}

/** MongoDB's "same document" test for no-op detection: identical BSON bytes, field order included. */
export function sameDocument(a: Document, b: Document): boolean {
  const same = samePlain(a, b);
  if (same !== undefined) return same;
  return Buffer.from(BSON.serialize(a)).equals(BSON.serialize(b));
}

/** A value {@link copyPlain} and {@link samePlain} leave to BSON itself. */
const NOT_PLAIN = Symbol('not plain');

/** A lone surrogate, which UTF-8 encoding turns into U+FFFD: such a string is left to BSON. */
const LONE_SURROGATE = /\p{Cs}/u;

/** A key js-bson treats specially (`_bsontype`, a NUL it refuses) or JS does (the prototype). */
function ordinaryKey(key: string): boolean {
  return key !== '_bsontype' && key !== '__proto__' && !key.includes('\0');
}

/** An {@link ordinaryKey} that no decoder reads as a DBRef field or an operator either. */
function plainKey(key: string): boolean {
  return key.charCodeAt(0) !== 0x24 && ordinaryKey(key);
}

/**
 * What the BSON round trip makes of a plain value: the same primitives (a number keeps its
 * value, -0 and NaN included; a string without lone surrogates), a new Date, copies of plain objects without their undefined
 * fields, and of arrays with undefined (or holes) as null. {@link NOT_PLAIN} for anything else.
 */
function copyPlain(value: unknown): unknown {
  switch (typeof value) {
    case 'string':
      return LONE_SURROGATE.test(value) ? NOT_PLAIN : value;
    case 'number':
    case 'boolean':
      return value;
    case 'object':
      break;
    default:
      return NOT_PLAIN;
  }
  if (value === null) return null;
  if (Array.isArray(value)) {
    const copy: unknown[] = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const itemCopy = item === undefined ? null : copyPlain(item);
      if (itemCopy === NOT_PLAIN) return NOT_PLAIN;
      copy[i] = itemCopy;
    }
    return copy;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === Date.prototype) {
    const time = (value as Date).getTime();
    return Number.isNaN(time) ? NOT_PLAIN : new Date(time);
  }
  if (prototype !== Object.prototype) return NOT_PLAIN;
  const copy: Document = {};
  for (const key of Object.keys(value)) {
    if (!plainKey(key)) return NOT_PLAIN;
    const item: unknown = (value as Document)[key];
    if (item === undefined) continue;
    const itemCopy = copyPlain(item);
    if (itemCopy === NOT_PLAIN) return NOT_PLAIN;
    copy[key] = itemCopy;
  }
  return copy;
}

type PlainKind = 'string' | 'number' | 'boolean' | 'null' | 'date' | 'array' | 'object';

/** The kind of a plain value (see {@link copyPlain}); undefined for anything else. */
function plainKind(value: unknown): PlainKind | undefined {
  switch (typeof value) {
    case 'string':
      return LONE_SURROGATE.test(value) ? undefined : 'string';
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
  if (Array.isArray(value)) return 'array';
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === Object.prototype) return 'object';
  if (prototype === Date.prototype && !Number.isNaN((value as Date).getTime())) return 'date';
  return undefined;
}

/**
 * Whether two values serialize to the same BSON bytes, decided without serializing when both
 * are plain; undefined when that takes BSON itself (another type, or an undefined value, which
 * BSON drops or turns into null, or NaN). Values of different kinds, or numbers that differ
 * (-0 is a double, 0 an int32), differ in their first bytes; so does the first differing element of
 * two documents or arrays whose elements before it are the same.
 */
function samePlain(a: unknown, b: unknown): boolean | undefined {
  const kind = plainKind(a);
  const otherKind = plainKind(b);
  if (kind === undefined || otherKind === undefined) return undefined;
  if (kind !== otherKind) return false;
  switch (kind) {
    case 'null':
      return true;
    case 'date':
      return (a as Date).getTime() === (b as Date).getTime();
    case 'array':
      return sameElements(a as unknown[], b as unknown[]);
    case 'object':
      return sameFields(a as Document, b as Document);
    case 'number':
      // NaNs differ by sign and payload bits, which only the bytes show.
      return Number.isNaN(a) || Number.isNaN(b) ? undefined : Object.is(a, b);
    default:
      return a === b;
  }
}

function sameElements(a: unknown[], b: unknown[]): boolean | undefined {
  const common = Math.min(a.length, b.length);
  for (let i = 0; i < common; i++) {
    const same = samePlain(a[i], b[i]);
    if (same !== true) return same;
  }
  return a.length === b.length;
}

function sameFields(a: Document, b: Document): boolean | undefined {
  const aKeys = Object.keys(a);
  const bKeys = Object.keys(b);
  const common = Math.min(aKeys.length, bKeys.length);
  for (let i = 0; i < common; i++) {
    const aValue: unknown = a[aKeys[i]];
    const bValue: unknown = b[bKeys[i]];
    if (aValue === undefined || bValue === undefined) return undefined;
    if (!ordinaryKey(aKeys[i]) || !ordinaryKey(bKeys[i])) return undefined;
    if (aKeys[i] !== bKeys[i]) return false;
    const same = samePlain(aValue, bValue);
    if (same !== true) return same;
  }
  const longer = aKeys.length > bKeys.length ? a : b;
  const longerKeys = longer === a ? aKeys : bKeys;
  for (let i = common; i < longerKeys.length; i++) {
    if (longer[longerKeys[i]] === undefined || !ordinaryKey(longerKeys[i])) return undefined;
  }
  return aKeys.length === bKeys.length;
}

function bsonTypeOf(value: unknown): string | undefined {
  if (value && typeof value === 'object' && '_bsontype' in value) {
    return String(value._bsontype);
  }
  return undefined;
}

/**
 * A string that is equal for two values exactly when MongoDB's equality (as used by indexes)
 * says they are equal: numbers compare by value whatever their BSON type.
 */
export function canonicalKey(value: unknown): string {
  if (value === undefined || value === null) return 'z';
  switch (typeof value) {
    case 'number':
      return `n${Object.is(value, -0) ? 0 : value}`;
    case 'bigint':
      return `n${value.toString()}`;
    case 'string':
      return `s${JSON.stringify(value)}`;
    case 'boolean':
      return value ? 'T' : 'F';
    default:
      break;
  }
  if (value instanceof Date) return `d${value.getTime()}`;
  if (value instanceof RegExp) return `r${String(value)}`;
  if (Array.isArray(value)) return `[${value.map(canonicalKey).join(',')}]`;
  const bsonType = bsonTypeOf(value);
  if (bsonType) return canonicalBsonKey(bsonType, value);
  const entries = Object.entries(value as Document).map(
    ([key, item]) => `${JSON.stringify(key)}:${canonicalKey(item)}`,
  );
  return `{${entries.join(',')}}`;
}

/** Base64 of a Binary's bytes, read in place (a session id is keyed three times per command). */
function binaryBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

function canonicalBsonKey(bsonType: string, value: Document): string {
  switch (bsonType) {
    case 'ObjectId':
      return `o${value.toHexString()}`;
    case 'Long':
    case 'Int32':
    case 'Double':
      return `n${value.toString()}`;
    case 'Decimal128': {
      const asNumber = Number(value.toString());
      return Number.isFinite(asNumber) ? `n${asNumber}` : `D${value.toString()}`;
    }
    case 'Binary':
      return `b${value.sub_type}:${binaryBase64(value.buffer as Uint8Array)}`;
    case 'Timestamp':
      return `t${value.toString()}`;
    case 'MinKey':
      return 'm';
    case 'MaxKey':
      return 'M';
    case 'BSONRegExp':
      return `r/${value.pattern}/${value.options}`;
    default:
      return `${bsonType}${JSON.stringify(value)}`;
  }
}

/** Follows a dotted path through embedded documents; arrays yield every element's value. */
export function valuesAtPath(document: unknown, path: string): unknown[] {
  const parts = path.split('.');
  let current: unknown[] = [document];
  for (const part of parts) {
    const next: unknown[] = [];
    for (const value of current) {
      if (Array.isArray(value)) {
        if (/^\d+$/.test(part)) next.push(value[Number(part)]);
        else
          for (const item of value)
            next.push(item && typeof item === 'object' ? (item as Document)[part] : undefined);
      } else if (value && typeof value === 'object') {
        next.push((value as Document)[part]);
      } else {
        next.push(undefined);
      }
    }
    current = next;
  }
  return current;
}

export function getPath(document: Document, path: string): unknown {
  let current: unknown = document;
  for (const part of path.split('.')) {
    if (!current || typeof current !== 'object') return undefined;
    current = (current as Document)[part];
  }
  return current;
}

/** Renders a value the way MongoDB prints it in a duplicate key message. */
export function formatForErrmsg(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null || value === undefined) return 'null';
  if (value instanceof Date) return `new Date(${value.getTime()})`;
  const bsonType = bsonTypeOf(value);
  if (bsonType === 'ObjectId') return `ObjectId('${(value as Document).toHexString()}')`;
  if (Array.isArray(value)) return `[ ${value.map(formatForErrmsg).join(', ')} ]`;
  if (typeof value === 'object' && !bsonType) {
    const body = Object.entries(value as Document)
      .map(([key, item]) => `${key}: ${formatForErrmsg(item)}`)
      .join(', ');
    return `{ ${body} }`;
  }
  return String(value);
}
