import type { Document } from 'bson';
import { evalExpr } from 'mingo/core';
import type { Options } from 'mingo/types';
import * as mingoUtil from 'mingo/util';
import { ARRAY_OPERATORS } from './compiled-array-operators';
import {
  type Bindings,
  type Evaluate,
  type NativeOperator,
  type Scope,
  type Split,
  OBJECT_FORM,
  SINGLE_FORM,
  arrayOf,
  evaluateAll,
  isNil,
  single,
  truthy,
} from './compiled-operator-support';
import { isDecimal128 } from './decimal128-arithmetic';
import { compareValues } from './value-order';
import { bindSystemVariables } from './system-variables';

/**
 * Aggregation expressions compiled to closures, for the expressions a lock sends on every
 * command (`$cond`, `$or`, `$eq`, `$lte`, `$ifNull`, `$add`, `$max`...). mingo interprets an
 * expression tree afresh on every evaluation, which made a findAndModify's update pipeline
 * and projection most of the server's CPU time.
 *
 * Semantics stay the operator table's (mingo's, with the server's replacements) by construction:
 *
 * - Only a few operators are compiled, each a line-by-line mirror of the operator table's
 *   (mingo's own code using its exported helpers `isEqual`, `typeOf`, `resolve`, with values
 *   ordered by the server's `compareValues`, value-order.ts); whenever a value is not of a
 *   type the mirror handles (an array for `$eq`, a string for `$add`...), the operator's
 *   whole subtree is handed to mingo instead, which returns its value or throws its error
 *   exactly as before (expressions are pure, so evaluating the arguments again is safe).
 * - Everything else (other operators, `$$ROOT`, user variables, `$let`...) is evaluated by
 *   mingo as a subtree, with `$$NOW` / `$$CLUSTER_TIME` bound as before.
 * - A compiled form is cached by the expression's *shape*: operator names, argument
 *   structure, field paths and object keys. Literal values (an owner token, a ttl) are not
 *   part of the shape: they are parameters read from the current command, as are subtrees
 *   mingo evaluates, so a cached closure never holds a value of an earlier command.
 */

export type { Bindings, Evaluate } from './compiled-operator-support';

// Plain references: mingo's CommonJS exports are getters, which cost a call each time.
const { isEqual, isOperator, isRegExp, resolve, typeOf } = mingoUtil;

const MAX_INT = 2147483647;
const MIN_INT = -2147483648;
const MAX_LONG = 9007199254740991;
const MIN_LONG = -9007199254740991;

/**
 * mingo's comparison predicate (`_predicates.compare`) for `$lt`, `$lte`, `$gt`, `$gte`, in
 * the server's order (value-order.ts: strings by code point, as the operator table's);
 * Decimal128 operands (compared by value, decimal128-operators.ts) are left to mingo.
 */
function comparison(holds: (order: number) => boolean): NativeOperator {
  return {
    split: arrayOf(2),
    build:
      ([left, right], viaMingo) =>
      (document, bindings) => {
        const a = left(document, bindings);
        const b = right(document, bindings);
        if (isDecimal128(b)) return viaMingo(document, bindings);
        const typeB = typeOf(b);
        for (const value of Array.isArray(a) ? (a as unknown[]) : [a]) {
          if (isDecimal128(value)) return viaMingo(document, bindings);
          if (typeOf(value) === typeB && holds(compareValues(value, b))) return true;
        }
        return false;
      },
  };
}

/**
 * mingo's `$eq` predicate; arrays (matched element-wise with a depth) and Decimal128 operands
 * (equal to numbers of the same value) are left to mingo.
 */
function equality(negate: boolean): NativeOperator {
  return {
    split: arrayOf(2),
    build:
      ([left, right], viaMingo) =>
      (document, bindings) => {
        const a = left(document, bindings);
        const b = right(document, bindings);
        if (isEqual(a, b) || (isNil(a) && isNil(b))) return !negate;
        if (Array.isArray(a) || isDecimal128(a) || isDecimal128(b)) {
          return viaMingo(document, bindings);
        }
        return negate;
      },
  };
}

/** An accumulator used as an expression; `accumulate` may reorder the array it is given. */
function accumulator(accumulate: (values: unknown[]) => unknown): NativeOperator {
  return {
    split: (argument) => (Array.isArray(argument) ? arrayOf()(argument) : single(argument)),
    build: (items, viaMingo, split) => {
      if (split.form !== SINGLE_FORM) {
        return (document, bindings) => accumulate(evaluateAll(items, document, bindings));
      }
      return (document, bindings) => {
        const values = items[0](document, bindings);
        // One operand that is not an array: over that one value, as MongoDB.
        return accumulate(Array.isArray(values) ? values.slice() : [values]);
      };
    },
  };
}

const NATIVE_OPERATORS: Record<string, NativeOperator> = {
  $cond: {
    split: (argument) => {
      if (Array.isArray(argument)) {
        return argument.length === 3 ? { form: 3, items: argument } : undefined;
      }
      if (typeOf(argument) !== 'object') return undefined;
      const spec = argument as Document;
      const keys = Object.keys(spec);
      const complete = keys.length === 3 && 'if' in spec && 'then' in spec && 'else' in spec;
      return complete ? { form: OBJECT_FORM, items: [spec.if, spec.then, spec.else] } : undefined;
    },
    build:
      ([condition, then, otherwise]) =>
      (document, bindings) =>
        truthy(condition(document, bindings))
          ? then(document, bindings)
          : otherwise(document, bindings),
  },
  $ifNull: {
    split: (argument) =>
      Array.isArray(argument) && argument.length > 0 ? arrayOf()(argument) : undefined,
    build: (items) => (document, bindings) => {
      let value: unknown;
      for (const item of items) {
        value = item(document, bindings);
        if (!isNil(value)) return value;
      }
      return value;
    },
  },
  $or: {
    split: arrayOf(),
    build: (items) => (document, bindings) => {
      for (const item of items) if (truthy(item(document, bindings))) return true;
      return false;
    },
  },
  $and: {
    split: arrayOf(),
    build: (items) => (document, bindings) => {
      for (const item of items) if (!truthy(item(document, bindings))) return false;
      return true;
    },
  },
  $not: {
    split: (argument) => (Array.isArray(argument) ? arrayOf(1)(argument) : single(argument)),
    build:
      ([item]) =>
      (document, bindings) =>
        !item(document, bindings),
  },
  $eq: equality(false),
  $ne: equality(true),
  $lt: comparison((order) => order < 0),
  $lte: comparison((order) => order <= 0),
  $gt: comparison((order) => order > 0),
  $gte: comparison((order) => order >= 0),
  $add: {
    split: arrayOf(),
    build: (items, viaMingo) => (document, bindings) => {
      const values = evaluateAll(items, document, bindings);
      let dateFound = false;
      let result = 0;
      for (const value of values) {
        if (isNil(value)) return null;
        if (typeof value === 'number') {
          result += value;
        } else if (value instanceof Date) {
          if (dateFound) return viaMingo(document, bindings);
          dateFound = true;
          result += +value;
        } else {
          return viaMingo(document, bindings);
        }
      }
      return dateFound ? new Date(result) : result;
    },
  },
  $subtract: {
    split: arrayOf(2),
    build:
      ([left, right], viaMingo) =>
      (document, bindings) => {
        const a = left(document, bindings);
        const b = right(document, bindings);
        if (isNil(a) || isNil(b)) return null;
        if (a instanceof Date && typeof b === 'number' && !Number.isNaN(b)) {
          return new Date(+a - Math.round(b));
        }
        if (a instanceof Date && b instanceof Date) return +a - +b;
        if (typeof a === 'number' && typeof b === 'number') return a - b;
        return viaMingo(document, bindings);
      },
  },
  // Accumulators, as expressions: over the argument list, over the array one argument
  // evaluates to, or else over that one value (see `mingo-options.ts`). `$max` / `$min` are the server's,
  // which order Decimal128 by value (decimal128-operators.ts).
  // Both skip null and missing values (MongoDB's `$max` and `$min` ignore them).
  $max: accumulator((values) => {
    const sorted = values.filter((value) => !isNil(value)).sort(compareValues);
    const last = sorted[sorted.length - 1];
    return isNil(last) ? null : last;
  }),
  $min: accumulator((values) => {
    const sorted = values.filter((value) => !isNil(value)).sort(compareValues);
    return isNil(sorted[0]) ? null : sorted[0];
  }),
  $sum: accumulator((values) => {
    let total = 0;
    for (const value of values)
      if (typeof value === 'number' && !Number.isNaN(value)) total += value;
    return total;
  }),
  $toLong: {
    split: single,
    build:
      ([item], viaMingo) =>
      (document, bindings) => {
        const value = item(document, bindings);
        if (value === true) return 1;
        if (value === false) return 0;
        if (isNil(value)) return null;
        if (value instanceof Date) return value.getTime();
        if (typeof value === 'number' && value >= MIN_LONG && value <= MAX_LONG) {
          return Math.trunc(value);
        }
        return viaMingo(document, bindings);
      },
  },
  ...ARRAY_OPERATORS,
  $type: {
    split: single,
    build:
      ([item]) =>
      (document, bindings) => {
        const value = item(document, bindings);
        if (value === undefined) return 'missing';
        if (value === true || value === false) return 'bool';
        if (typeof value === 'number' && !Number.isNaN(value)) {
          if (value % 1 != 0) return 'double';
          return value >= MIN_INT && value <= MAX_INT ? 'int' : 'long';
        }
        if (isRegExp(value)) return 'regex';
        if (isDecimal128(value)) return 'decimal'; // MongoDB's name; mingo says decimal128
        return typeOf(value);
      },
  },
};

/**
 * `$$NOW.x` (and `$$NOWx`) is the one expression mingo evaluates against a lazily taken clock
 * shared within one evaluation; splitting an expression into several mingo evaluations could
 * change its value, so expressions that mention it stay entirely with mingo.
 */
function mentionsLazyNow(value: unknown, inScope: boolean): boolean {
  if (typeof value === 'string') return isLazyNow(value) || (inScope && isCurrent(value));
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (mentionsLazyNow(value[i], inScope)) return true;
    return false;
  }
  // Walked on every command that hands a subtree to mingo: no key arrays, no closures.
  if (typeof value !== 'object' || value === null || typeOf(value) !== 'object') return false;
  for (const key in value as Document) {
    if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
    if (mentionsLazyNow((value as Document)[key], inScope)) return true;
  }
  return false;
}

/**
 * `$$CURRENT`: inside mingo's `$reduce` it is the element, not the document the compiled
 * closures are given, so within a compiled scope it stays with mingo as a whole.
 */
function isCurrent(text: string): boolean {
  return text === '$$CURRENT' || text.startsWith('$$CURRENT.');
}

/** The name of a `$$name` / `$$name.path` variable reference. */
function variableName(text: string): string {
  const dot = text.indexOf('.');
  return dot === -1 ? text.slice(2) : text.slice(2, dot);
}

/** `$$NOW.x` or `$$NOWx`, not `$$NOW` (checked by its first character first: most are not). */
function isLazyNow(text: string): boolean {
  return text.charCodeAt(0) === 0x24 && text.startsWith('$$NOW') && text !== '$$NOW';
}

/** How one node is evaluated, from its structure only (never from literal values). */
const PARAM = 0; // a literal: string, number, date, BSON value...
const LITERAL = 1; // `{$literal: value}`: the value, unevaluated
const MINGO = 2; // evaluated by mingo (after binding $$NOW / $$CLUSTER_TIME)
const NOW = 3;
const CLUSTER_TIME = 4;
const UNSUPPORTED = 5; // the whole expression stays with mingo
const PATH = 6;
const ARRAY = 7;
const OBJECT = 8;
const OPERATOR = 9;
const VARIABLE = 10; // `$$name` bound by a compiled operator around it

/** Set by `classify` for OPERATOR: read before classifying anything else. */
let classifiedName = '';
let classifiedOperator: NativeOperator | undefined;
let classifiedSplit: Split | undefined;

function classify(expression: unknown, scope: Scope): number {
  if (typeof expression === 'string') {
    if (expression.length === 0 || expression[0] !== '$') return PARAM;
    if (expression === '$$NOW') return NOW;
    if (expression === '$$CLUSTER_TIME') return CLUSTER_TIME;
    if (expression.startsWith('$$NOW')) return UNSUPPORTED;
    if (scope.length > 0 && expression[1] === '$') {
      if (scope.includes(variableName(expression))) return VARIABLE;
      if (isCurrent(expression)) return UNSUPPORTED;
    }
    // `$$ROOT`, `$$CURRENT`, user variables, and the bare `$` (the whole document).
    if (expression.length === 1 || expression[1] === '$') return MINGO;
    return PATH;
  }
  if (Array.isArray(expression)) return ARRAY;
  // Numbers, booleans, null, dates, regular expressions, BSON values: returned as they are.
  if (typeOf(expression) !== 'object') return PARAM;
  const object = expression as Document;
  let first: string | undefined;
  let count = 0;
  let dollar = false;
  for (const key in object) {
    if (!Object.prototype.hasOwnProperty.call(object, key)) continue;
    if (count === 0) first = key;
    count += 1;
    if (key[0] === '$') dollar = true;
  }
  // Names in the table are operators: the regex is needed only for the others.
  const native =
    first !== undefined && Object.prototype.hasOwnProperty.call(NATIVE_OPERATORS, first);
  if (first !== undefined && (native || isOperator(first))) {
    if (count === 1) {
      if (first === '$literal') return LITERAL;
      const operator = native ? NATIVE_OPERATORS[first] : undefined;
      const split = operator?.split(object[first], scope);
      if (split) {
        classifiedName = first;
        classifiedOperator = operator;
        classifiedSplit = split;
        return OPERATOR;
      }
    }
    return mentionsLazyNow(object, scope.length > 0) ? UNSUPPORTED : MINGO;
  }
  if (dollar) return mentionsLazyNow(object, scope.length > 0) ? UNSUPPORTED : MINGO;
  return OBJECT;
}

/** Structural tokens of a shape (numbers); names and paths are string tokens. */
export const SHAPE_PARAM = -10;
const SHAPE_MINGO = -11;
const SHAPE_NOW = -12;
const SHAPE_CLUSTER_TIME = -13;
const SHAPE_PATH = -14;
const SHAPE_ARRAY = -15;
const SHAPE_OBJECT = -16;
const SHAPE_OPERATOR = -17;
export const SHAPE_END = -18;
const SHAPE_VARIABLE = -19;
const SHAPE_BINDS = -20;

/**
 * The shape of one command's expressions and their parameters, written by `writeShape`:
 * numbers for structure and the expression's own names (operators, keys, variables) as they
 * are. Literals and field paths are parameters: a path is read the same way whatever it names,
 * so commands that differ only in the key or owner they touch share a form. Every node starts with a number
 * and strings stand only where the grammar expects a name, so equal token sequences mean equal
 * shapes. `hash` is updated as tokens are added (FNV-1a).
 */
export class ShapeWriter {
  readonly tokens: Array<number | string> = [];
  hash = 0x811c9dc5;
  readonly params: unknown[] = [];
  /** Something only mingo may evaluate as a whole: the caller takes mingo's path. */
  unsupported = false;

  constructor(readonly variables: Document) {}

  /** A structural token (callers use their own numbers for their own structure). */
  mark(token: number): void {
    this.tokens.push(token);
    this.hash = Math.imul(this.hash ^ (token & 0xffff), 0x01000193) ^ (token >>> 16);
  }

  /** A name: an operator, a path, a key, a field. */
  text(token: string): void {
    this.tokens.push(token);
    let hash = Math.imul(this.hash ^ 0x5f, 0x01000193);
    for (let i = 0; i < token.length; i++) {
      hash = Math.imul(hash ^ token.charCodeAt(i), 0x01000193);
    }
    this.hash = hash;
  }

  /** The tokens as one string (numbers `#`-prefixed, strings JSON-quoted): for tests and logs. */
  get key(): string {
    return this.tokens
      .map((token) => (typeof token === 'number' ? `#${token}` : JSON.stringify(token)))
      .join(' ');
  }
}

/** Appends the shape of `expression` to `out` and its parameters to `out.params`. */
export function writeShape(expression: unknown, out: ShapeWriter, scope: Scope = []): void {
  switch (classify(expression, scope)) {
    case PARAM:
      out.mark(SHAPE_PARAM);
      out.params.push(expression);
      return;
    case LITERAL:
      // Compiled exactly like a literal: the value is a parameter.
      out.mark(SHAPE_PARAM);
      out.params.push((expression as Document).$literal);
      return;
    case MINGO:
      // Unbound: `compileExpression` binds it when it is first evaluated.
      out.mark(SHAPE_MINGO);
      out.params.push(expression);
      return;
    case NOW:
      out.mark(SHAPE_NOW);
      return;
    case CLUSTER_TIME:
      out.mark(SHAPE_CLUSTER_TIME);
      return;
    case UNSUPPORTED:
      out.unsupported = true;
      return;
    case PATH:
      // A parameter, not a name: paths that differ per key or owner (`$holders.<slot>`) share
      // one compiled form.
      out.mark(SHAPE_PATH);
      out.params.push((expression as string).slice(1));
      return;
    case VARIABLE:
      out.mark(SHAPE_VARIABLE);
      out.text(expression as string);
      return;
    case ARRAY:
      out.mark(SHAPE_ARRAY);
      for (const item of expression as unknown[]) writeShape(item, out, scope);
      out.mark(SHAPE_END);
      return;
    case OBJECT:
      out.mark(SHAPE_OBJECT);
      for (const key of Object.keys(expression as Document)) {
        out.text(key);
        writeShape((expression as Document)[key], out, scope);
      }
      out.mark(SHAPE_END);
      return;
    case OPERATOR: {
      const name = classifiedName;
      const split = classifiedSplit!;
      out.mark(SHAPE_OPERATOR);
      out.text(name);
      out.mark(split.form);
      // Bound names come from literals (`as`, `$let`'s keys): the compiled form depends on them.
      for (const binds of split.binds ?? []) {
        out.mark(SHAPE_BINDS);
        for (const bound of binds) out.text(bound);
      }
      // The operator itself, unbound, for handing it to mingo (bound only if that happens).
      out.params.push(expression);
      split.items.forEach((item, i) => writeShape(item, out, itemScope(scope, split, i)));
      out.mark(SHAPE_END);
      return;
    }
  }
}

function itemScope(scope: Scope, split: Split, index: number): Scope {
  const binds = split.binds?.[index];
  return binds && binds.length > 0 ? [...scope, ...binds] : scope;
}

/**
 * `expression` for mingo where compiled operators have bound `scope`'s variables: inside a
 * `$let` giving them their current values, which is how mingo's own operators pass them on.
 */
function withLocals(expression: unknown, scope: Scope, bindings: Bindings): unknown {
  if (scope.length === 0) return expression;
  const vars: Document = {};
  for (const name of scope) vars[name] = { $literal: bindings.locals?.get(name) };
  return { $let: { vars, in: expression } };
}

/** The mingo subtree in `slot` with NOW / CLUSTER_TIME bound, bound once per command. */
function boundParam(bindings: Bindings, slot: number): unknown {
  const bound = (bindings.bound ??= []);
  if (!(slot in bound))
    bound[slot] = bindSystemVariables(bindings.params[slot], bindings.variables);
  return bound[slot];
}

/** Parameter slots are taken in the order `writeShape` pushes parameters. */
export interface SlotCounter {
  next: number;
}

/** Compiles `expression`; its parameters are read from the slots `writeShape` filled. */
export function compileExpression(
  expression: unknown,
  slots: SlotCounter,
  scope: Scope = [],
): Evaluate {
  switch (classify(expression, scope)) {
    case PARAM:
    case LITERAL: {
      const slot = slots.next++;
      return (_document, bindings) => bindings.params[slot];
    }
    case MINGO: {
      const slot = slots.next++;
      if (scope.length > 0) {
        return (document, bindings) =>
          evalExpr(
            document,
            withLocals(boundParam(bindings, slot), scope, bindings),
            bindings.options as Options,
          );
      }
      return (document, bindings) =>
        evalExpr(document, boundParam(bindings, slot), bindings.options as Options);
    }
    case VARIABLE: {
      const reference = expression as string;
      const name = variableName(reference);
      if (reference.length === name.length + 2) {
        return (_document, bindings) => bindings.locals?.get(name);
      }
      // mingo resolves `name.path` in an object of the variables.
      const path = reference.slice(2);
      return (_document, bindings) => resolve({ [name]: bindings.locals?.get(name) }, path);
    }
    case NOW:
      return (_document, bindings) => bindings.variables.NOW;
    case CLUSTER_TIME:
      return (_document, bindings) => bindings.variables.CLUSTER_TIME;
    case PATH: {
      const slot = slots.next++;
      return (document, bindings) => resolve(document, bindings.params[slot] as string);
    }
    case ARRAY: {
      const items = (expression as unknown[]).map((item) => compileExpression(item, slots, scope));
      return (document, bindings) => evaluateAll(items, document, bindings);
    }
    case OBJECT: {
      const keys = Object.keys(expression as Document);
      const values = keys.map((key) =>
        compileExpression((expression as Document)[key], slots, scope),
      );
      return (document, bindings) => {
        const result: Document = {};
        for (let i = 0; i < keys.length; i++) result[keys[i]] = values[i](document, bindings);
        return result;
      };
    }
    case OPERATOR: {
      const operator = classifiedOperator!;
      const split = classifiedSplit!;
      const slot = slots.next++;
      const viaMingo: Evaluate = (document, bindings) =>
        evalExpr(
          document,
          withLocals(
            bindSystemVariables(bindings.params[slot], bindings.variables),
            scope,
            bindings,
          ),
          bindings.options as Options,
        );
      const items = split.items.map((item, i) =>
        compileExpression(item, slots, itemScope(scope, split, i)),
      );
      return operator.build(items, viaMingo, split);
    }
    default:
      throw new Error('compileExpression: not compilable (writeShape reported it unsupported)');
  }
}

/** Compiled expressions assume mingo's strict mode and `_id` key, which the server always uses. */
export function hasServerSemantics(options: Partial<Options>): boolean {
  return options.useStrictMode === true && (options.idKey ?? '_id') === '_id';
}
