import { Decimal128, Long } from 'mongodb';
import { fitsLong, isBson, isLong } from '../bson-values';
import type { Document } from 'mongodb';

export type DocumentVersionType = 'int' | 'date' | 'decimal128';

/** The version field of a collection's documents, bumped by every write the library makes. */
export interface DocumentVersion {
  field: string;
  type: DocumentVersionType;
}

const BSON_TYPES: Record<DocumentVersionType, string[]> = {
  int: ['int', 'long'],
  date: ['date'],
  decimal128: ['decimal'],
};

/** What a number version's bump adds. */
const ONE = { int: 1, decimal128: Decimal128.fromString('1') };

/** Filter: the version field exists with the configured type. */
export function versionTyped(version: DocumentVersion): Document {
  return { [version.field]: { $type: BSON_TYPES[version.type] } };
}

/** Expression: the version field has the configured type. */
export function versionTypedExpr(version: DocumentVersion): Document {
  return { $in: [{ $type: `$${version.field}` }, BSON_TYPES[version.type]] };
}

/**
 * The operators and filter that bump the version in an update document. A date moves to the
 * server's time, which must be later than the stored one: a second write in the same ms matches
 * nothing and is tried again.
 */
export function versionBumpOperators(
  version: DocumentVersion,
  /** A date version found not before the server's clock: move it 1 ms past this value instead. */
  dateAhead?: Date,
): { operators: Document; filter: Document } {
  if (version.type !== 'date') {
    return { operators: { $inc: { [version.field]: ONE[version.type] } }, filter: {} };
  }
  // After `dateAhead`: compare-and-set on the value read, strictly later whatever the clocks.
  return dateAhead
    ? {
        operators: { $set: { [version.field]: new Date(dateAhead.getTime() + 1) } },
        filter: { [version.field]: dateAhead },
      }
    : {
        operators: { $currentDate: { [version.field]: { $type: 'date' } } },
        filter: { $expr: { $lt: [`$${version.field}`, '$$NOW'] } },
      };
}

/** The pipeline stage that bumps the version: +1, or a date strictly later than the stored one. */
export function versionBumpStage(version: DocumentVersion): Document {
  const current = `$${version.field}`;
  const next =
    version.type === 'date'
      ? { $max: ['$$NOW', { $add: [current, 1] }] }
      : { $add: [current, ONE[version.type]] };
  return { $set: { [version.field]: next } };
}

/** A caller's version value (or an `If-Match` ETag) in the field's BSON type; else `undefined`. */
export function toVersionValue(version: DocumentVersion, value: unknown): unknown {
  // Text is compared as ETags are, exactly ("01" is not version 1's "1"): a form other than
  // `versionTag`'s stays text, which no version equals: a conflict, never a match.
  const canonical = (converted: unknown) =>
    typeof value !== 'string' || versionTag(converted) === value ? converted : value;
  switch (version.type) {
    case 'int':
      if (typeof value === 'number' && Number.isSafeInteger(value)) return value;
      if (typeof value === 'bigint') return fitsLong(value) ? Long.fromBigInt(value) : undefined;
      // Not a Timestamp (a Long subclass): no version type.
      if (isLong(value)) return value;
      if (typeof value === 'string' && /^-?\d{1,19}$/.test(value)) {
        const number = Number(value);
        // Past 64 bits, the Long wraps: `canonical` then keeps the text, which no version equals.
        return canonical(Number.isSafeInteger(number) ? number : Long.fromBigInt(BigInt(value)));
      }
      return undefined;
    case 'decimal128':
      if (isBson(value, 'Decimal128')) return value;
      if (typeof value === 'number' && Number.isFinite(value)) {
        return Decimal128.fromString(String(value));
      }
      // With the exponent form `toString` gives for some values (`1E+3`, `1.5E-7`).
      if (typeof value === 'string' && /^-?\d+(\.\d+)?(E[+-]\d+)?$/.test(value)) {
        // Past a decimal's 34 digits or exponent range: not a version.
        const decimal = decimalOf(value);
        return decimal && canonical(decimal);
      }
      return undefined;
    case 'date': {
      if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value;
      const ms = typeof value === 'string' && /^-?\d{1,16}$/.test(value) ? Number(value) : value;
      if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || Math.abs(ms) > 8.64e15) {
        return undefined;
      }
      return canonical(new Date(ms));
    }
  }
}

/** The decimal `text` writes; `undefined` when no Decimal128 holds it (34 digits, its exponents). */
export function decimalOf(text: string): Decimal128 | undefined {
  try {
    return Decimal128.fromString(text);
  } catch {
    return undefined;
  }
}

/** The version as a strong ETag value: `17`, a decimal's digits, a date's epoch milliseconds. */
export function versionTag(value: unknown): string | undefined {
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (isLong(value) || isBson(value, 'Decimal128')) return value.toString();
  if (value instanceof Date) return String(value.getTime());
  return undefined;
}
