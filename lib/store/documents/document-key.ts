import { BSON, Decimal128, Double, Long } from 'mongodb';
import type { Document, Filter } from 'mongodb';
import { DocumentNotFoundError } from '../../errors/document-not-found.error';
import { isPlainObject } from '../../util/value-kinds';
import { fitsLong, isBson, isLong } from '../bson-values';
import { isDuplicateKeyError } from '../mongo-error-codes';
import { decimalOf } from './document-version';

/** An `_id` as a lock key: canonical Extended JSON, so ids of different types never share one. */
export function keyOfDocumentId(id: unknown): string {
  return BSON.EJSON.stringify(canonicalId(id), { relaxed: false });
}

/**
 * The server matches 1, Long(1), 1.0 and -0.0 alike, at any depth: so must the key. A Timestamp
 * (a Long to the bson library) is no number: keyed as itself.
 */
function canonicalId(id: unknown): unknown {
  // By BSON type, not class: an Int32 or Double of another bson copy is the same number.
  if (typeof id === 'number') return canonicalNumber(id);
  if (isBson(id, 'Int32') || isBson(id, 'Double')) return canonicalNumber(Number(id.valueOf()));
  if (isLong(id)) return Number.isSafeInteger(id.toNumber()) ? id.toNumber() : id;
  // An int64 as a client with `useBigInt64` reads it (a change event's `documentKey`, say).
  if (typeof id === 'bigint' && fitsLong(id)) return canonicalId(Long.fromBigInt(id));
  if (isBson(id, 'Decimal128')) return canonicalDecimal(id.toString()) ?? id;
  if (!isPlainObject(id)) return id;
  return Object.fromEntries(Object.entries(id).map(([name, value]) => [name, canonicalId(value)]));
}

/**
 * -0 as 0; an integer past 2^53 as the Long of its exact value (EJSON would write the double's
 * rounded digits: another number), or a Double when no Long holds it.
 */
function canonicalNumber(value: number): number | Long | Double {
  if (Object.is(value, -0)) return 0;
  if (Number.isSafeInteger(value) || !Number.isInteger(value)) return value;
  const fitsLong = value >= -(2 ** 63) && value < 2 ** 63;
  return fitsLong ? Long.fromBigInt(BigInt(value)) : new Double(value);
}

/**
 * A decimal's value in one form: MongoDB compares decimals by value (`1.50` is `1.5`, `1E+3` is
 * `1000`, `-0` is `0`), and a change event carries the stored form. NaN and the infinities stay
 * as they are. (The form is also the `_id` a `createIfMissing` inserts.)
 */
function canonicalDecimal(text: string): Decimal128 | undefined {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:E([+-]\d+))?$/.exec(text);
  if (!match) return undefined;
  const [, sign, whole, fraction = '', exponent = '0'] = match;
  let digits = (whole + fraction).replace(/^0+/, '');
  if (digits === '') return Decimal128.fromString('0');
  // As near exponent 0 as 34 digits allow: `1E+3` and `1000` key as `1000`, `1.50` as `1.5`.
  let power = Number(exponent) - fraction.length;
  while (power < 0 && digits.endsWith('0')) {
    digits = digits.slice(0, -1);
    power += 1;
  }
  while (power > 0 && digits.length < 34) {
    digits += '0';
    power -= 1;
  }
  return decimalOf(`${sign}${digits}E${power >= 0 ? '+' : ''}${power}`);
}

/** The `_id` a key stands for: the inverse of {@link keyOfDocumentId}. */
export function documentIdOfKey(key: string): unknown {
  return BSON.EJSON.parse(key, { relaxed: false });
}

/**
 * The `_id` a key stands for as a caller gives it, for errors' `id`: numbers as numbers (an int64
 * past 2^53 as a `bigint`), not the BSON wrappers a filter needs.
 */
export function callerIdOfKey(key: string): unknown {
  return asGiven(documentIdOfKey(key));
}

function asGiven(value: unknown): unknown {
  if (isBson(value, 'Int32') || isBson(value, 'Double')) return Number(value.valueOf());
  if (isLong(value))
    return Number.isSafeInteger(value.toNumber()) ? value.toNumber() : value.toBigInt();
  if (!isPlainObject(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([name, inner]) => [name, asGiven(inner)]));
}

export function byKey(key: string): Filter<Document> {
  return { _id: documentIdOfKey(key) } as Filter<Document>;
}

/** No document has the id of `key` (that meets `where`, when one was given). */
export function documentNotFound(key: string, where?: unknown): DocumentNotFoundError {
  return new DocumentNotFoundError(
    `No document with _id ${key}${where ? " that meets the lock's `where`" : ''}`,
    { id: callerIdOfKey(key) },
  );
}

/** A duplicate key on `_id` (not on another unique index of the application's). */
export function isDuplicateIdError(error: unknown): boolean {
  if (!isDuplicateKeyError(error)) return false;
  const { keyPattern, message } = error as { keyPattern?: Document; message?: string };
  if (keyPattern) return Object.keys(keyPattern).length === 1 && '_id' in keyPattern;
  return /index: _id_ /.test(message ?? '');
}
