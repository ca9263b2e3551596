// Classifies driver values by their BSON type, as the spec's `$$type` names them.
import { Binary, Long } from 'bson';

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

export function bsonTypeOf(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (value === null) return 'null';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'boolean') return 'bool';
  // A JS number as Extended JSON reads it: an integer is an int32 when it fits, else an int64.
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) return 'double';
    return value >= INT32_MIN && value <= INT32_MAX ? 'int' : 'long';
  }
  if (typeof value === 'bigint') return 'long';
  if (Array.isArray(value)) return 'array';
  if (value instanceof Date) return 'date';
  if (value instanceof RegExp) return 'regex';
  if (value instanceof Uint8Array) return 'binData';
  const tag = (value as { _bsontype?: string })._bsontype;
  switch (tag) {
    case undefined:
      return 'object';
    case 'ObjectId':
      return 'objectId';
    case 'Binary':
      return 'binData';
    case 'Long':
      return 'long';
    case 'Int32':
      return 'int';
    case 'Double':
      return 'double';
    case 'Decimal128':
      return 'decimal';
    case 'Timestamp':
      return 'timestamp';
    case 'BSONRegExp':
      return 'regex';
    case 'Code':
      return (value as { scope?: unknown }).scope ? 'javascriptWithScope' : 'javascript';
    case 'MinKey':
      return 'minKey';
    case 'MaxKey':
      return 'maxKey';
    case 'BSONSymbol':
      return 'symbol';
    case 'DBRef':
      return 'object';
    default:
      return tag;
  }
}

/**
 * Whether `value` has one of the BSON types named. The driver deserialises int32, int64 (when it
 * fits) and double alike into a JS number, so an integral number may be any of the three; a
 * fractional one only a double.
 */
export function hasBsonType(value: unknown, names: readonly string[]): boolean {
  if (typeof value === 'number') {
    const possible = Number.isInteger(value)
      ? value >= INT32_MIN && value <= INT32_MAX
        ? ['int', 'long', 'double', 'number']
        : ['long', 'double', 'number']
      : ['double', 'number'];
    return names.some((name) => possible.includes(name));
  }
  const actual = bsonTypeOf(value);
  if (actual === undefined) return false;
  if (names.includes(actual)) return true;
  return names.includes('number') && ['int', 'long', 'double', 'decimal'].includes(actual);
}

/** A numeric value (excluding Decimal128) as a JS number, for flexible numeric comparison. */
export function numericValue(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  const tag = (value as { _bsontype?: string } | null)?._bsontype;
  // Timestamp extends Long in bson, so the tag, not instanceof, tells them apart.
  if (tag === 'Long') return (value as Long).toNumber();
  if (tag === 'Int32' || tag === 'Double') return (value as { valueOf(): number }).valueOf();
  return undefined;
}

/** Raw bytes of a binary value, or undefined. */
export function bytesOf(value: unknown): Uint8Array | undefined {
  if (value instanceof Binary) return value.buffer.subarray(0, value.position);
  if (value instanceof Uint8Array) return value;
  return undefined;
}

/** A plain document: not an array, not a BSON scalar wrapper, not a Date/RegExp/bytes. */
export function isDocument(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  if (Array.isArray(value) || value instanceof Date || value instanceof RegExp) return false;
  if (value instanceof Uint8Array || value instanceof Map) return false;
  const tag = (value as { _bsontype?: string })._bsontype;
  return tag === undefined || tag === 'DBRef';
}
