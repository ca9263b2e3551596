import * as mingoUtil from 'mingo/util';
import { compareNumeric, isDecimal128, isNumeric } from './decimal128-arithmetic';

/**
 * The server's one order of values (sorts, range queries, `$cmp`, `$max` / `$min`...): mingo's
 * `compare`, except for two things MongoDB does otherwise.
 *
 * - Strings (without a collation) compare by their UTF-8 bytes, which is Unicode code point
 *   order. mingo compares them with JavaScript's `<`, by UTF-16 code units, which puts a
 *   character above U+FFFF (stored as a surrogate pair, D800-DFFF) before one in
 *   U+E000..U+FFFF (private use, CJK compatibility, fullwidth forms...): `'k:😀' < 'k:\uE000'`
 *   for mingo, after it for MongoDB.
 * - A Decimal128 is a number: ordered by value with numbers and other decimals (mingo orders
 *   two decimals by their text).
 *
 * Everything else is mingo's `compare` line by line (type order, arrays by their sorted
 * elements, objects by sorted keys then values, an array against a scalar by its elements),
 * recursing with this order so that strings inside arrays and documents compare the same way.
 */

const { compare: mingoCompare, typeOf } = mingoUtil;

/**
 * Code point order of two strings. Their first differing UTF-16 units decide, as for `<`,
 * except when both are at or above U+D800: a surrogate (the start of a character above U+FFFF)
 * then sorts above U+E000..U+FFFF (the fix-up ICU's `u_strCompare` uses for code point order).
 */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x < y ? -1 : 1;
  }
  return a.length < b.length ? -1 : 1;
}

/** mingo's order of types (its `SORT_ORDER`, not exported). */
const TYPE_ORDER: Record<string, number> = {
  undefined: 1,
  null: 2,
  number: 3,
  string: 4,
  symbol: 5,
  object: 6,
  array: 7,
  arraybuffer: 8,
  boolean: 9,
  date: 10,
  regexp: 11,
  function: 12,
};

const simple = (a: number, b: number): number => (a < b ? -1 : a > b ? 1 : 0);

const hasCustomString = (value: object): boolean =>
  (value as { toString?: unknown }).toString !== Object.prototype.toString;

function compareArrays(a: unknown[], b: unknown[]): number {
  const xs = a.slice().sort(compareNested);
  const ys = b.slice().sort(compareNested);
  const size = Math.min(xs.length, ys.length);
  for (let i = 0; i < size; i++) {
    const order = compareNested(xs[i], ys[i]);
    if (order) return order;
  }
  return simple(xs.length, ys.length);
}

function compareSameType(type: string, a: unknown, b: unknown): number {
  switch (type) {
    case 'string':
      return compareStrings(a as string, b as string);
    case 'regexp': {
      const x = a as RegExp;
      const y = b as RegExp;
      return compareStrings(x.source, y.source) || compareStrings(x.flags, y.flags);
    }
    case 'array':
      return compareArrays(a as unknown[], b as unknown[]);
    case 'number':
    case 'boolean':
    case 'date':
    case 'arraybuffer':
    case 'undefined':
    case 'null':
      return mingoCompare(a, b);
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  if (type !== 'object') {
    // An ObjectId, a Binary...: by their text, as mingo.
    if (x.constructor === y.constructor && hasCustomString(x)) {
      const text = (value: unknown): string => (value as { toString(): string }).toString();
      return compareStrings(text(x), text(y));
    }
  }
  const keysA = Object.keys(x).sort(compareStrings);
  const keysB = Object.keys(y).sort(compareStrings);
  const order = compareArrays(keysA, keysB);
  if (order) return order;
  for (const key of keysA) {
    const inner = compareNested(x[key], y[key]);
    if (inner) return inner;
  }
  return 0;
}

function order(a: unknown, b: unknown, descendArray: boolean): number {
  if (a === b || Object.is(a, b)) return 0;
  if (typeof a === 'string' && typeof b === 'string') return compareStrings(a, b);
  if (typeof a === 'number' && typeof b === 'number') return simple(a, b);
  const decimalA = isDecimal128(a);
  const decimalB = isDecimal128(b);
  if (decimalA || decimalB) {
    if (isNumeric(a) && isNumeric(b)) return compareNumeric(a, b);
    // A decimal against a non-number: it sorts where numbers sort.
    if (decimalA) a = 0;
    if (decimalB) b = 0;
  }
  const typeA = typeOf(a);
  const typeB = typeOf(b);
  if (typeA === typeB) return compareSameType(typeA, a, b);
  if (typeA === 'undefined') return -1;
  if (typeB === 'undefined') return 1;
  if (descendArray) {
    // mingo: an array against a scalar by its elements (the least one that is not above it).
    if (typeA === 'array') {
      const xs = a as unknown[];
      if (xs.length === 0) return -1;
      let result = 1;
      for (const value of xs.slice().sort(compareNested)) {
        result = Math.min(result, compareNested(value, b));
        if (result < 0) return result;
      }
      return result;
    }
    if (typeB === 'array') {
      const ys = b as unknown[];
      if (ys.length === 0) return 1;
      let result = -1;
      for (const value of ys.slice().sort(compareNested)) {
        result = Math.max(result, compareNested(a, value));
        if (result > 0) return result;
      }
      return result;
    }
  }
  // Different types: mingo's type order (then its type names).
  const rankA = TYPE_ORDER[typeA] ?? Number.MAX_VALUE;
  const rankB = TYPE_ORDER[typeB] ?? Number.MAX_VALUE;
  return rankA !== rankB ? simple(rankA, rankB) : typeA < typeB ? -1 : typeA > typeB ? 1 : 0;
}

/** Inside arrays and documents (mingo's `mingoCmp` without `descendArray`). */
function compareNested(a: unknown, b: unknown): number {
  return order(a, b, false);
}

/** MongoDB's order of two values (mingo's `compare`, see above). */
export function compareValues(a: unknown, b: unknown): number {
  return order(a, b, true);
}
