import type { Decimal128 } from 'bson';
import { evalExpr } from 'mingo/core';
import { $push } from 'mingo/operators/accumulator';
import * as mingoArithmetic from 'mingo/operators/expression/arithmetic';
import * as mingoComparison from 'mingo/operators/expression/comparison';
import { $type as mingoType } from 'mingo/operators/expression/type';
import * as mingoQueryComparison from 'mingo/operators/query/comparison';
import { $type as mingoQueryType } from 'mingo/operators/query/element';
import type { AnyObject, Options } from 'mingo/types';
import * as mingoUtil from 'mingo/util';
import {
  type Numeric,
  compareNumeric,
  decimalAdd,
  decimalFromNumberExact,
  decimalMultiply,
  decimalSubtract,
  decimalToInteger,
  isDecimal128,
  isNaNValue,
  isNumeric,
} from './decimal128-arithmetic';
import { compareValues } from './value-order';

export { compareValues } from './value-order';

/**
 * mingo's operators with Decimal128 as MongoDB has it: a number. mingo knows only JS numbers,
 * so `$add` refused a decimal, `{v: Decimal128('3')}` did not match `v: 3`, and two decimals
 * were ordered by their text ('10' < '9'). These replace mingo's in the server's operator
 * table (mingo-options.ts) and hand every evaluation without a decimal to mingo's own
 * operator, with the already evaluated arguments as literals, so nothing else changes.
 */

const { ensureArray, flatten, isEqual, isNil, resolve, typeOf } = mingoUtil;

type ExpressionOperator = (obj: AnyObject, expr: unknown, options: Options) => unknown;
type AccumulatorOperator = (collection: AnyObject[], expr: unknown, options: Options) => unknown;
type QueryOperator = (
  selector: string,
  value: unknown,
  options: Options,
) => (document: AnyObject) => boolean;

/** A decimal, or an array with one (at any depth). */
function involvesDecimal(value: unknown): boolean {
  if (isDecimal128(value)) return true;
  return Array.isArray(value) && value.some(involvesDecimal);
}

/** mingo's `isEqual`, with a decimal equal to any number or decimal of the same value. */
export function valuesEqual(a: unknown, b: unknown): boolean {
  if ((isDecimal128(a) || isDecimal128(b)) && isNumeric(a) && isNumeric(b)) {
    return compareNumeric(a, b) === 0;
  }
  return isEqual(a, b);
}

/** mingo's `$eq` predicate (`_predicates.$eq`) with `valuesEqual`. */
function equalityHolds(a: unknown, b: unknown, depth: number): boolean {
  if (valuesEqual(a, b)) return true;
  if (isNil(a) && isNil(b)) return true;
  if (Array.isArray(a)) {
    return (
      a.some((value) => valuesEqual(value, b)) ||
      flatten(a, depth).some((value) => valuesEqual(value, b))
    );
  }
  return false;
}

/**
 * mingo's ordering predicate (`_predicates.compare`: an element of `a` of `b`'s type) with
 * the server's order (value-order.ts: strings by code point, numbers and decimals together;
 * mingo compares strings by UTF-16 unit). In a query (`nanNeverOrders`) NaN orders nothing,
 * as in MongoDB's matcher: it is only equal (`$lte`, `$gte`) to NaN.
 */
function orderHolds(
  a: unknown,
  b: unknown,
  holds: (order: number) => boolean,
  nanNeverOrders: boolean,
): boolean {
  const typeB = typeOf(b);
  for (const value of ensureArray(a)) {
    if (isNumeric(value) && isNumeric(b) && (isDecimal128(value) || isDecimal128(b))) {
      if (nanNeverOrders && (isNaNValue(value) || isNaNValue(b))) {
        if (isNaNValue(value) && isNaNValue(b) && holds(0)) return true;
      } else if (holds(compareNumeric(value, b))) {
        return true;
      }
    } else if (typeOf(value) === typeB && holds(compareValues(value, b))) {
      return true;
    }
  }
  return false;
}

const literal = (value: unknown): { $literal: unknown } => ({ $literal: value });

// ---------------------------------------------------------------- expression operators

/** mingo's `$gt` and co. (`processExpression` with its predicate), in the server's order. */
function comparisonExpression(
  mingoOperator: ExpressionOperator,
  holds: (order: number) => boolean,
): ExpressionOperator {
  return (obj, expr, options) => {
    if (!Array.isArray(expr) || expr.length !== 2) return mingoOperator(obj, expr, options);
    const [a, b] = evalExpr(obj, expr, options) as unknown[];
    return orderHolds(a, b, holds, false);
  };
}

function equalityExpression(
  mingoOperator: ExpressionOperator,
  negate: boolean,
): ExpressionOperator {
  return (obj, expr, options) => {
    if (!Array.isArray(expr) || expr.length !== 2) return mingoOperator(obj, expr, options);
    const [a, b] = evalExpr(obj, expr, options) as unknown[];
    if (!involvesDecimal(a) && !involvesDecimal(b)) {
      return mingoOperator(obj, [literal(a), literal(b)], options);
    }
    const depth = (options as { local?: { depth?: number } }).local?.depth ?? 1;
    return equalityHolds(a, b, depth) !== negate;
  };
}

const $cmp: ExpressionOperator = (obj, expr, options) => {
  if (!Array.isArray(expr) || expr.length !== 2) return mingoComparison.$cmp(obj, expr, options);
  const [a, b] = evalExpr(obj, expr, options) as unknown[];
  return compareValues(a, b);
};

/**
 * Runs MongoDB's `$add` / `$multiply` accumulation once a decimal is among the values: values
 * before the first decimal are combined as numbers (mingo's way), their total is carried into
 * a decimal (`Decimal128(double, kRoundTo34Digits)` for a fractional total, exactly for an
 * integer one) and every later value is combined as a decimal. Undefined when a value is not
 * one this handles (mingo's operator then gives its result or error).
 */
function accumulateWithDecimals(
  values: unknown[],
  start: number,
  numberStep: (total: number, value: number) => number,
  decimalStep: (total: Decimal128, value: Numeric) => Decimal128,
  allowDate: boolean,
): { value: unknown } | undefined {
  let numberTotal = start;
  let decimalTotal: Decimal128 | undefined;
  let date: Date | undefined;
  for (const value of values) {
    if (isNil(value)) return { value: null };
    let operand: Numeric;
    if (value instanceof Date) {
      if (!allowDate || date) return undefined;
      date = value;
      operand = value.getTime();
    } else if (isNumeric(value)) {
      operand = value;
    } else {
      return undefined;
    }
    if (decimalTotal === undefined && isDecimal128(operand)) {
      decimalTotal = decimalFromNumberExact(numberTotal);
    }
    if (decimalTotal === undefined) numberTotal = numberStep(numberTotal, operand as number);
    else decimalTotal = decimalStep(decimalTotal, operand);
  }
  if (decimalTotal === undefined) return undefined;
  // MongoDB: a date plus decimals is the date at the decimal total's nearest millisecond.
  return { value: date ? new Date(decimalToInteger(decimalTotal)) : decimalTotal };
}

function arithmeticExpression(
  mingoOperator: ExpressionOperator,
  accumulate: (values: unknown[]) => { value: unknown } | undefined,
  requireArrayExpression: boolean,
): ExpressionOperator {
  return (obj, expr, options) => {
    if (requireArrayExpression && !Array.isArray(expr)) return mingoOperator(obj, expr, options);
    const args = evalExpr(obj, expr, options);
    if (Array.isArray(args) && args.some(isDecimal128)) {
      const result = accumulate(args);
      if (result) return result.value;
    }
    const literals = Array.isArray(args) ? args.map(literal) : literal(args);
    return mingoOperator(obj, literals, options);
  };
}

const $add = arithmeticExpression(
  mingoArithmetic.$add,
  (values) => accumulateWithDecimals(values, 0, (total, value) => total + value, decimalAdd, true),
  false,
);

const $multiply = arithmeticExpression(
  mingoArithmetic.$multiply,
  (values) =>
    accumulateWithDecimals(values, 1, (total, value) => total * value, decimalMultiply, false),
  true,
);

/** MongoDB's `$subtract` of numbers and decimals (a decimal result), or of a decimal from a date. */
function subtractWithDecimals(values: unknown[]): { value: unknown } | undefined {
  if (values.length !== 2) return undefined;
  const [a, b] = values;
  if (isNil(a) || isNil(b)) return { value: null };
  if (isNumeric(a) && isNumeric(b)) return { value: decimalSubtract(a, b) };
  if (a instanceof Date && isDecimal128(b)) {
    return { value: new Date(a.getTime() - decimalToInteger(b)) };
  }
  return undefined;
}

const $subtract = arithmeticExpression(mingoArithmetic.$subtract, subtractWithDecimals, true);

/** MongoDB names the Decimal128 type `decimal` (mingo says `decimal128`). */
const $type: ExpressionOperator = (obj, expr, options) => {
  const value = evalExpr(obj, expr, options);
  if (isDecimal128(value)) return 'decimal';
  return mingoType(obj, literal(value), options);
};

export const DECIMAL_EXPRESSION_OPERATORS: Record<string, ExpressionOperator> = {
  $add,
  $type,
  $subtract,
  $multiply,
  $cmp,
  $eq: equalityExpression(mingoComparison.$eq, false),
  $ne: equalityExpression(mingoComparison.$ne, true),
  $gt: comparisonExpression(mingoComparison.$gt, (order) => order > 0),
  $gte: comparisonExpression(mingoComparison.$gte, (order) => order >= 0),
  $lt: comparisonExpression(mingoComparison.$lt, (order) => order < 0),
  $lte: comparisonExpression(mingoComparison.$lte, (order) => order <= 0),
};

// ---------------------------------------------------------------- accumulators

/** mingo's `$max` / `$min` accumulators (also the `$max` / `$min` expressions), decimal-aware. */
export const DECIMAL_ACCUMULATOR_OPERATORS: Record<string, AccumulatorOperator> = {
  // Null and missing values are skipped, as by MongoDB (a JavaScript sort would put a missing
  // one last, above every value).
  $max: (collection, expr, options) => {
    const items = $push(collection, expr, options)
      .filter((item) => !isNil(item))
      .sort(compareValues);
    const last = items[items.length - 1];
    return isNil(last) ? null : last;
  },
  $min: (collection, expr, options) => {
    const items = $push(collection, expr, options)
      .filter((item) => !isNil(item))
      .sort(compareValues);
    return isNil(items[0]) ? null : items[0];
  },
};

// ---------------------------------------------------------------- query operators

const RESOLVE_OPTIONS = { unwrapArray: true };

function dotCount(selector: string): number {
  let count = 0;
  for (let i = selector.indexOf('.'); i !== -1; i = selector.indexOf('.', i + 1)) count += 1;
  return count;
}

const resolved = (document: AnyObject, selector: string): unknown =>
  resolve(document, selector, RESOLVE_OPTIONS);

/**
 * `{field: number | decimal}`: mingo's test, or (when it says no) the decimal-aware one. A
 * match by mingo is always right; a decimal is what it can miss.
 */
const $eq: QueryOperator = (selector, value, options) => {
  const test = mingoQueryComparison.$eq(selector, value, options);
  if (!isNumeric(value)) return test;
  const depth = dotCount(selector);
  return (document) => test(document) || equalityHolds(resolved(document, selector), value, depth);
};

const $ne: QueryOperator = (selector, value, options) => {
  if (!isNumeric(value)) return mingoQueryComparison.$ne(selector, value, options);
  const equal = $eq(selector, value, options);
  return (document) => !equal(document);
};

const $in: QueryOperator = (selector, value, options) => {
  const test = mingoQueryComparison.$in(selector, value, options);
  if (!Array.isArray(value) || !value.some(isNumeric)) return test;
  const numbers = value.filter(isNumeric);
  return (document) => {
    if (test(document)) return true;
    const found = resolved(document, selector);
    if (isNil(found)) return false;
    return ensureArray(found).some(
      (item) => isNumeric(item) && numbers.some((number) => valuesEqual(item, number)),
    );
  };
};

const $nin: QueryOperator = (selector, value, options) => {
  if (!Array.isArray(value) || !value.some(isNumeric)) {
    return mingoQueryComparison.$nin(selector, value, options);
  }
  const within = $in(selector, value, options);
  return (document) => !within(document);
};

/**
 * `$gt` and co.: mingo's `processQuery` with its predicate, in the server's order. Against a
 * number, mingo's test, or the decimal-aware one when it says no; against anything else (a
 * decimal, which mingo orders by its text, a string, which it orders by UTF-16 unit...) only
 * the server's.
 */
function orderQuery(
  mingoOperator: QueryOperator,
  holds: (order: number) => boolean,
): QueryOperator {
  return (selector, value, options) => {
    const test = mingoOperator(selector, value, options);
    const ordered = (document: AnyObject): boolean =>
      orderHolds(resolved(document, selector), value, holds, true);
    if (typeof value !== 'number') return ordered;
    return (document) => test(document) || ordered(document);
  };
}

/** `{$type: 'decimal'}` (or 19, or 'number'): mingo does not know Decimal128 by MongoDB's names. */
const $typeQuery: QueryOperator = (selector, value, options) => {
  const wanted = Array.isArray(value) ? (value as unknown[]) : [value];
  const decimalWanted = wanted.some(
    (type) => type === 'decimal' || type === 19 || type === 'number',
  );
  const others = wanted.filter((type) => type !== 'decimal' && type !== 19);
  const test = others.length > 0 ? mingoQueryType(selector, others, options) : () => false;
  if (!decimalWanted) return test;
  return (document) => {
    if (test(document)) return true;
    const found = resolved(document, selector);
    return ensureArray(found).some((item) => isDecimal128(item));
  };
};

export const DECIMAL_QUERY_OPERATORS: Record<string, QueryOperator> = {
  $type: $typeQuery,
  $eq,
  $ne,
  $in,
  $nin,
  $gt: orderQuery(mingoQueryComparison.$gt, (order) => order > 0),
  $gte: orderQuery(mingoQueryComparison.$gte, (order) => order >= 0),
  $lt: orderQuery(mingoQueryComparison.$lt, (order) => order < 0),
  $lte: orderQuery(mingoQueryComparison.$lte, (order) => order <= 0),
};
