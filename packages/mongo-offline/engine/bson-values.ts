/* eslint-disable @typescript-eslint/no-base-to-string -- BSON classes (Long, Timestamp, Decimal128) define toString */
import { BSON, type Document } from 'bson';
import { decodeBson } from '../wire/bson-decoder';
import { NOT_PLAIN, copyPlain, samePlainDocuments } from './plain-documents';

/**
 * A deep copy that keeps BSON classes (structuredClone would drop ObjectId's prototype):
 * `BSON.deserialize(BSON.serialize(document), { promoteLongs: true })`, decoded by the
 * server's decoder (the same values; without UTF-8 validation, which bytes just encoded from
 * JavaScript strings always pass). Plain documents (every lock document) are copied directly,
 * with the same result (`plain-documents.ts`).
 */
export function cloneDocument<T extends Document>(document: T): T {
  const copy = copyPlain(document);
  if (copy !== NOT_PLAIN) return copy as T;
  const bytes = BSON.serialize(document);
  return decodeBson(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)) as T;
}

/**
 * MongoDB's "same document" test for no-op detection: identical BSON bytes, field order
 * included (decided without serializing for plain documents, `plain-documents.ts`).
 */
export function sameDocument(a: Document, b: Document): boolean {
  return samePlainDocuments(a, b) ?? Buffer.from(BSON.serialize(a)).equals(BSON.serialize(b));
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
