import { type Document, Long } from 'bson';
import * as mingoUtil from 'mingo/util';
import { CommandError } from '../commands/errors';
import { formatForErrmsg } from './bson-values';
import { decimalAdd, decimalMultiply, isDecimal128, isNumeric } from './decimal128-arithmetic';
import { compareValues } from './value-order';

const { typeOf } = mingoUtil;

/**
 * `$inc`, `$mul`, `$min` and `$max` with a Decimal128 (as the amount or as the field's value),
 * and `$min` / `$max` of a string over a string (in code point order, value-order.ts), done
 * as MongoDB does them. mingo's updater takes its operators from a fixed table, in which
 * `$inc` refuses a decimal amount ("Cannot increment with non-numeric argument.") and leaves
 * a decimal field unchanged, so these entries are computed here and handed to mingo as
 * `$set`s of their results.
 *
 * Only plain paths are taken over; a path with a positional or array-filter segment, a path
 * that another operator also touches (mingo reports the conflict) and a path through a
 * non-document stay with mingo, as before.
 */

const OPERATORS = ['$inc', '$mul', '$min', '$max'] as const;
type Operator = (typeof OPERATORS)[number];

type Lookup = { status: 'value'; value: unknown } | { status: 'missing' } | { status: 'blocked' };

/** The value at a plain dotted path, or why there is none. */
function lookup(document: Document, path: string): Lookup {
  let current: unknown = document;
  for (const part of path.split('.')) {
    if (current === undefined) return { status: 'missing' };
    if (Array.isArray(current)) {
      if (!/^\d+$/.test(part)) return { status: 'blocked' };
    } else if (typeOf(current) !== 'object') {
      return { status: 'blocked' };
    }
    current = (current as Document)[part];
  }
  return current === undefined ? { status: 'missing' } : { status: 'value', value: current };
}

function typeName(value: unknown): string {
  if (typeof value === 'string') return 'string';
  if (typeof value === 'boolean') return 'bool';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (value instanceof Date) return 'date';
  const type = typeOf(value);
  return type === 'object' ? 'object' : type;
}

function nonNumeric(operator: Operator, document: Document, path: string, value: unknown): never {
  const id = '_id' in document ? `_id: ${formatForErrmsg(document._id)}` : 'no id';
  const field = path.slice(path.lastIndexOf('.') + 1);
  throw new CommandError(
    14,
    `Cannot apply ${operator} to a value of non-numeric type. {${id}} has the field '${field}' of non-numeric type ${typeName(value)}`,
  );
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function isLong(value: unknown): value is { toString(): string } {
  return (
    typeof value === 'object' &&
    value !== null &&
    '_bsontype' in value &&
    value._bsontype === 'Long'
  );
}

/**
 * What mingo's updater gets wrong about `$inc` / `$mul` on a field that is not a Decimal128: it
 * applies as a no-op one of a field that holds no number (MongoDB: TypeMismatch, as above), and
 * one of an int64 kept as a Long (engine values are numbers but for longs past 2^53,
 * bson-decoder.ts). MongoDB adds or multiplies a long by an int or a long in int64, refusing a
 * result out of range (BadValue; it widens an int to a long, never a long), and by a double in
 * double arithmetic. The new value of a Long field, else `null` (left to the rest).
 */
function longArithmetic(
  operator: '$inc' | '$mul',
  document: Document,
  path: string,
  found: Lookup,
  argument: unknown,
): { value: unknown } | null {
  if (found.status !== 'value' || !(isNumeric(argument) || isLong(argument))) return null;
  const current = found.value;
  if (!isLong(current)) {
    if (!isNumeric(current)) nonNumeric(operator, document, path, current);
    return null;
  }
  if (isDecimal128(argument)) return null;
  // The driver sends a whole number within int32 as an int, any other as a double.
  const int =
    typeof argument === 'number' &&
    Number.isInteger(argument) &&
    argument >= -(2 ** 31) &&
    argument < 2 ** 31;
  if (typeof argument === 'number' && !int) {
    const value = Number(current.toString());
    return { value: operator === '$inc' ? value + argument : value * argument };
  }
  const [a, b] = [BigInt(current.toString()), BigInt(String(argument))];
  const result = operator === '$inc' ? a + b : a * b;
  if (result >= INT64_MIN && result <= INT64_MAX) return { value: Long.fromBigInt(result) };
  const id = '_id' in document ? `_id: ${formatForErrmsg(document._id)}` : 'no id';
  throw new CommandError(
    2,
    `Failed to apply ${operator} operations to current value ((NumberLong)${a}) for document {${id}}`,
  );
}

/** The new value, `undefined` to leave the field as it is, or `null` to leave it to mingo. */
function compute(
  operator: Operator,
  document: Document,
  path: string,
  found: Lookup,
  argument: unknown,
): { value: unknown } | undefined | null {
  if (found.status === 'blocked') return null;
  const current = found.status === 'value' ? found.value : undefined;
  switch (operator) {
    case '$inc':
    case '$mul': {
      // A non-numeric amount fails in mingo, with MongoDB's TypeMismatch.
      if (!isNumeric(argument)) return null;
      if (found.status === 'missing') {
        // MongoDB: `$inc` sets the amount, `$mul` a zero of the multiplier's type.
        return { value: operator === '$inc' ? argument : decimalMultiply(argument, 0) };
      }
      if (!isNumeric(current)) nonNumeric(operator, document, path, current);
      const operate = operator === '$inc' ? decimalAdd : decimalMultiply;
      return { value: operate(current, argument) };
    }
    case '$min':
    case '$max': {
      if (found.status === 'missing') return { value: argument };
      const order = compareValues(argument, current);
      const replaces = operator === '$min' ? order < 0 : order > 0;
      return replaces ? { value: argument } : undefined;
    }
  }
}

function overlaps(a: string, b: string): boolean {
  return a === b || a.startsWith(`${b}.`) || b.startsWith(`${a}.`);
}

/** Every path the modifier touches, with the operator that touches it. */
function touchedPaths(modifier: Document): Array<[string, string]> {
  const paths: Array<[string, string]> = [];
  for (const [operator, argument] of Object.entries(modifier)) {
    if (!argument || typeof argument !== 'object') continue;
    for (const [path, value] of Object.entries(argument as Document)) {
      paths.push([operator, path]);
      if (operator === '$rename' && typeof value === 'string') paths.push([operator, value]);
    }
  }
  return paths;
}

/**
 * `modifier` with its Decimal128 `$inc` / `$mul` / `$min` / `$max` entries replaced by `$set`s
 * of their results on `document` (the same object when there are none). Throws MongoDB's
 * TypeMismatch for a decimal `$inc` / `$mul` of a non-numeric field.
 */
export function resolveDecimalOperators(document: Document, modifier: Document): Document {
  if (!OPERATORS.some((operator) => operator in modifier)) return modifier;
  let result: Document | undefined;
  let paths: Array<[string, string]> | undefined;
  for (const operator of OPERATORS) {
    const entries: unknown = modifier[operator];
    if (!entries || typeof entries !== 'object') continue;
    for (const [path, argument] of Object.entries(entries as Document)) {
      if (path.split('.').some((part) => part.startsWith('$'))) continue;
      const found = lookup(document, path);
      paths ??= touchedPaths(modifier);
      const conflicting = paths.some(
        ([other, otherPath]) =>
          !(other === operator && otherPath === path) && overlaps(path, otherPath),
      );
      // mingo reports the conflict (ConflictingUpdateOperators).
      if (conflicting) continue;
      const arithmetic = operator === '$inc' || operator === '$mul';
      let outcome: { value: unknown } | null | undefined = arithmetic
        ? longArithmetic(operator, document, path, found, argument)
        : null;
      if (outcome === null) {
        const decimalField = found.status === 'value' && isDecimal128(found.value);
        // Two strings: mingo's updater would compare them by UTF-16 unit, not by code point.
        const strings =
          (operator === '$min' || operator === '$max') &&
          typeof argument === 'string' &&
          found.status === 'value' &&
          typeof found.value === 'string';
        if (!isDecimal128(argument) && !decimalField && !strings) continue;
        outcome = compute(operator, document, path, found, argument);
        if (outcome === null) continue;
      }
      result ??= { ...modifier };
      const remaining: Document = { ...(result[operator] as Document) };
      delete remaining[path];
      result[operator] = remaining;
      if (outcome !== undefined) result.$set = { ...(result.$set ?? {}), [path]: outcome.value };
    }
  }
  if (!result) return modifier;
  for (const operator of OPERATORS) {
    if (result[operator] && Object.keys(result[operator] as Document).length === 0) {
      delete result[operator];
    }
  }
  return result;
}
