import type { Long } from 'mongodb';

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
  return (value as { _bsontype?: unknown } | null | undefined)?._bsontype === 'Long';
}
