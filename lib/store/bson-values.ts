import type { Decimal128, Int32, Long, ObjectId } from 'mongodb';
import { isPlainObject } from '../util/value-kinds';

/** A BSON integer as the driver may return it (number, Long or, with useBigInt64, bigint). */
export type BsonInteger = number | bigint | Long;

export function toBigInt(value: BsonInteger | null | undefined): bigint {
  if (value == null) return 0n;
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number') return BigInt(Math.trunc(value));
  return value.toBigInt();
}

/** Milliseconds, clamped at 0: a negative remaining lease means "expired". */
export function toRemainingMs(value: BsonInteger | null | undefined): number {
  if (value == null) return 0;
  const ms = typeof value === 'number' ? value : Number(value);
  return Number.isFinite(ms) && ms > 0 ? ms : 0;
}

/** A bigint a BSON Long can hold (64 bits): a wider one would wrap, silently. */
export function fitsLong(value: bigint): boolean {
  return BigInt.asIntN(64, value) === value;
}

/**
 * A BSON Long, by its BSON type: the bson library makes Timestamp a subclass of Long, but a
 * Timestamp is another type to MongoDB (no number, never equal to one).
 */
export function isLong(value: unknown): value is Long {
  return bsonTypeOf(value) === 'Long';
}

/**
 * A value's BSON type name (`_bsontype`), as the driver reads it: not `instanceof`, which misses
 * values made by another copy of the bson package (an application's own `bson`, a Mongoose with
 * its own driver), values the driver sends all the same.
 */
export function bsonTypeOf(value: unknown): string | undefined {
  // A plain object naming a `_bsontype` is no BSON value (the driver refuses to send it).
  if (typeof value !== 'object' || value === null || isPlainObject(value)) return undefined;
  const type = (value as { _bsontype?: unknown })._bsontype;
  return typeof type === 'string' ? type : undefined;
}

interface BsonTypes {
  Decimal128: Decimal128;
  Int32: Int32;
  Double: { valueOf(): number };
  ObjectId: ObjectId;
}

/** `value` is a BSON `type` value, from any copy of the bson package. */
export function isBson<K extends keyof BsonTypes>(value: unknown, type: K): value is BsonTypes[K] {
  return bsonTypeOf(value) === type;
}
