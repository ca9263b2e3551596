import { Decimal128 } from 'bson';

/**
 * Exact decimal arithmetic and comparison for Decimal128, as MongoDB does them (IEEE 754-2008
 * decimal128: 34 significant digits, round half to even). Values are worked on as
 * coefficient × 10^exponent with BigInt coefficients, from Decimal128's string form, so
 * 0.1 + 0.2 is exactly 0.3 and the result keeps IEEE's exponent (1.50 + 1 = 2.50).
 *
 * Numbers mix in as MongoDB converts them: an int or long exactly, a double to 15 significant
 * digits (`Decimal128(double)`, kRoundTo15Digits). The server deserializes every int, long and
 * double into a JS number, so a whole number is taken for an int or long and any other for a
 * double. Comparisons are exact, as MongoDB's: a double is compared by its exact binary value.
 * Approximate only at the extremes: subnormal results are rounded once, and an exponent above
 * the format's range becomes Infinity.
 */

interface Finite {
  readonly kind: 'finite';
  readonly negative: boolean;
  /** Never negative: the sign is `negative` (so -0 exists, as in IEEE). */
  readonly coefficient: bigint;
  readonly exponent: number;
}

interface NotANumber {
  readonly kind: 'nan';
  readonly negative: boolean;
}

interface Infinite {
  readonly kind: 'infinity';
  readonly negative: boolean;
}

type Exact = Finite | NotANumber | Infinite;

export type Numeric = number | Decimal128;

const PRECISION = 34;
const MAX_EXPONENT = 6111;
const MIN_EXPONENT = -6176;
const NAN: NotANumber = { kind: 'nan', negative: false };
const TEN = 10n;

export function isDecimal128(value: unknown): value is Decimal128 {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { _bsontype?: unknown })._bsontype === 'Decimal128'
  );
}

/** A number or a Decimal128: the values MongoDB compares and computes with as numbers. */
export function isNumeric(value: unknown): value is Numeric {
  return typeof value === 'number' || isDecimal128(value);
}

function infinity(negative: boolean): Infinite {
  return { kind: 'infinity', negative };
}

function finite(negative: boolean, coefficient: bigint, exponent: number): Finite {
  return { kind: 'finite', negative, coefficient, exponent };
}

const DECIMAL_TEXT = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

function parse(text: string): Exact {
  const match = DECIMAL_TEXT.exec(text);
  if (!match) {
    if (/^[+-]?inf(inity)?$/i.test(text)) return infinity(text.startsWith('-'));
    return NAN;
  }
  const [, sign, integer = '', fraction = '', exponent = '0'] = match;
  const digits = integer + fraction;
  return finite(sign === '-', BigInt(digits || '0'), Number(exponent) - fraction.length);
}

function digitCount(value: bigint): number {
  return value === 0n ? 1 : value.toString().length;
}

function pow10(exponent: number): bigint {
  return TEN ** BigInt(exponent);
}

/** `value / 10^drop`, rounded half to even. */
function dropDigits(value: bigint, drop: number): bigint {
  const divisor = pow10(drop);
  let quotient = value / divisor;
  const remainder = value % divisor;
  const half = divisor / 2n;
  if (remainder > half || (remainder === half && quotient % 2n === 1n)) quotient += 1n;
  return quotient;
}

/** Rounded to 34 digits and the format's exponent range, as a decimal128 operation's result. */
function rounded(value: Exact): Exact {
  if (value.kind !== 'finite') return value;
  let { coefficient, exponent } = value;
  const drop = Math.max(digitCount(coefficient) - PRECISION, MIN_EXPONENT - exponent, 0);
  if (drop > 0) {
    coefficient = dropDigits(coefficient, drop);
    exponent += drop;
    if (digitCount(coefficient) > PRECISION) {
      coefficient /= TEN;
      exponent += 1;
    }
  }
  if (exponent > MAX_EXPONENT) {
    // Clamped: the coefficient takes trailing zeros when it has room, else it overflows.
    const pad = exponent - MAX_EXPONENT;
    if (coefficient !== 0n && digitCount(coefficient) + pad > PRECISION) {
      return infinity(value.negative);
    }
    coefficient *= pow10(pad);
    exponent = MAX_EXPONENT;
  }
  return finite(value.negative, coefficient, exponent);
}

function fromDecimal128(value: Decimal128): Exact {
  return parse(value.toString());
}

/** A number as MongoDB turns it into a decimal: an integer exactly, a double to 15 digits. */
function fromNumber(value: number): Exact {
  if (Number.isNaN(value)) return NAN;
  if (!Number.isFinite(value)) return infinity(value < 0);
  if (Number.isSafeInteger(value)) return finite(value < 0, BigInt(Math.abs(value)), 0);
  return parse(value.toPrecision(15));
}

function toExact(value: Numeric): Exact {
  return typeof value === 'number' ? fromNumber(value) : fromDecimal128(value);
}

/** The exact value of a double (every finite double is a finite decimal: m × 2^-k = m × 5^k × 10^-k). */
function exactDouble(value: number): Exact {
  if (Number.isNaN(value)) return NAN;
  if (!Number.isFinite(value)) return infinity(value < 0);
  const negative = value < 0 || Object.is(value, -0);
  const magnitude = Math.abs(value);
  if (Number.isInteger(magnitude)) return finite(negative, BigInt(magnitude), 0);
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, magnitude);
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  let mantissa = bits & ((1n << 52n) - 1n);
  let exponent = -1074;
  if (biased !== 0) {
    mantissa |= 1n << 52n;
    exponent = biased - 1075;
  }
  // Not an integer, so the binary exponent is negative.
  return finite(negative, mantissa * 5n ** BigInt(-exponent), exponent);
}

function toDecimal128(value: Exact): Decimal128 {
  if (value.kind === 'nan') return Decimal128.fromString('NaN');
  if (value.kind === 'infinity')
    return Decimal128.fromString(value.negative ? '-Infinity' : 'Infinity');
  const sign = value.negative ? '-' : '';
  return Decimal128.fromString(`${sign}${value.coefficient}E${value.exponent}`);
}

function signed(value: Finite, exponent: number): bigint {
  const scaled = value.coefficient * pow10(value.exponent - exponent);
  return value.negative ? -scaled : scaled;
}

function addExact(a: Exact, b: Exact): Exact {
  if (a.kind === 'nan' || b.kind === 'nan') return NAN;
  if (a.kind === 'infinity') {
    return b.kind === 'infinity' && b.negative !== a.negative ? NAN : a;
  }
  if (b.kind === 'infinity') return b;
  const exponent = Math.min(a.exponent, b.exponent);
  const sum = signed(a, exponent) + signed(b, exponent);
  // IEEE: an exact zero sum is +0, except that -0 + -0 is -0.
  const negative = sum < 0n || (sum === 0n && a.negative && b.negative);
  return rounded(finite(negative, sum < 0n ? -sum : sum, exponent));
}

function negate(value: Exact): Exact {
  if (value.kind === 'nan') return value;
  return value.kind === 'infinity'
    ? infinity(!value.negative)
    : finite(!value.negative, value.coefficient, value.exponent);
}

function multiplyExact(a: Exact, b: Exact): Exact {
  if (a.kind === 'nan' || b.kind === 'nan') return NAN;
  const negative = a.negative !== b.negative;
  if (a.kind === 'infinity' || b.kind === 'infinity') {
    const zero =
      (a.kind === 'finite' && a.coefficient === 0n) ||
      (b.kind === 'finite' && b.coefficient === 0n);
    return zero ? NAN : infinity(negative);
  }
  return rounded(finite(negative, a.coefficient * b.coefficient, a.exponent + b.exponent));
}

function signOf(value: Finite): number {
  if (value.coefficient === 0n) return 0;
  return value.negative ? -1 : 1;
}

/** MongoDB's order: NaN below everything (and equal to NaN), then -Infinity ... Infinity. */
function compareExact(a: Exact, b: Exact): number {
  if (a.kind === 'nan') return b.kind === 'nan' ? 0 : -1;
  if (b.kind === 'nan') return 1;
  const rank = (value: Exact): number =>
    value.kind === 'infinity' ? (value.negative ? -1 : 1) : 0;
  const rankA = rank(a);
  const rankB = rank(b);
  if (rankA !== rankB || rankA !== 0) return Math.sign(rankA - rankB);
  const x = a as Finite;
  const y = b as Finite;
  const signX = signOf(x);
  const signY = signOf(y);
  if (signX !== signY || signX === 0) return Math.sign(signX - signY);
  // Same sign, both non-zero: the magnitudes decide, largest digit position first.
  const magnitudeX = digitCount(x.coefficient) + x.exponent;
  const magnitudeY = digitCount(y.coefficient) + y.exponent;
  let order: number;
  if (magnitudeX !== magnitudeY) {
    order = magnitudeX < magnitudeY ? -1 : 1;
  } else {
    const exponent = Math.min(x.exponent, y.exponent);
    const scaledX = x.coefficient * pow10(x.exponent - exponent);
    const scaledY = y.coefficient * pow10(y.exponent - exponent);
    order = scaledX < scaledY ? -1 : scaledX > scaledY ? 1 : 0;
  }
  return signX < 0 ? -order : order;
}

/** `a + b` as a Decimal128 (either may be a number, converted as MongoDB converts it). */
export function decimalAdd(a: Numeric, b: Numeric): Decimal128 {
  return toDecimal128(addExact(toExact(a), toExact(b)));
}

/** `a - b` as a Decimal128. */
export function decimalSubtract(a: Numeric, b: Numeric): Decimal128 {
  return toDecimal128(addExact(toExact(a), negate(toExact(b))));
}

/** `a × b` as a Decimal128. */
export function decimalMultiply(a: Numeric, b: Numeric): Decimal128 {
  return toDecimal128(multiplyExact(toExact(a), toExact(b)));
}

/**
 * A number as a Decimal128 with `Decimal128(double, kRoundTo34Digits)`: the double's exact
 * value to 34 digits (how MongoDB's `$add` / `$multiply` carry a double total into a decimal
 * one). An integer is exact.
 */
export function decimalFromNumberExact(value: number): Decimal128 {
  return toDecimal128(rounded(exactDouble(value)));
}

/** -1, 0 or 1: the exact numeric order of two numbers or decimals (NaN lowest, NaN = NaN). */
export function compareNumeric(a: Numeric, b: Numeric): number {
  const x = typeof a === 'number' ? exactDouble(a) : fromDecimal128(a);
  const y = typeof b === 'number' ? exactDouble(b) : fromDecimal128(b);
  return compareExact(x, y);
}

export function isNaNValue(value: Numeric): boolean {
  return typeof value === 'number' ? Number.isNaN(value) : fromDecimal128(value).kind === 'nan';
}

/** The nearest integer (half to even), as a number: a decimal's milliseconds for a date. */
export function decimalToInteger(value: Decimal128): number {
  const exact = fromDecimal128(value);
  if (exact.kind === 'nan') return NaN;
  if (exact.kind === 'infinity') return exact.negative ? -Infinity : Infinity;
  const magnitude =
    exact.exponent >= 0
      ? exact.coefficient * pow10(exact.exponent)
      : dropDigits(exact.coefficient, -exact.exponent);
  return Number(exact.negative ? -magnitude : magnitude);
}
