import type { Document } from 'bson';
import * as mingoUtil from 'mingo/util';

const { typeOf } = mingoUtil;

/**
 * A change stream's `$match` as plain JavaScript, for the filters that watch for kinds of
 * change: `$or` / `$and` of field conditions that are a string or boolean, or operators among
 * `$eq` (string or boolean), `$in` (strings), `$exists` (boolean) and `$type: 'null'`.
 * mingo's compiled Query costs as much per event as the rest of the event's path together.
 *
 * The test answers true, false, or undefined: undecided, when a path meets an array (where
 * MongoDB's array traversal applies) or a value that is neither a plain object nor a scalar.
 * The caller then asks mingo, which decides every case as it did before.
 */
export type EventTest = (event: Document) => boolean | undefined;

/** The filter as an EventTest, or undefined when it uses anything else (mingo evaluates it). */
export function compileEventFilter(filter: unknown): EventTest | undefined {
  if (!isPlainObject(filter)) return undefined;
  const tests: EventTest[] = [];
  for (const key of Object.keys(filter)) {
    const value: unknown = filter[key];
    const test =
      key === '$or' || key === '$and'
        ? compileLogical(key, value)
        : key.startsWith('$')
          ? undefined
          : compileField(key, value);
    if (!test) return undefined;
    tests.push(test);
  }
  return tests.length === 1 ? tests[0] : combine(tests, false);
}

function compileLogical(operator: '$or' | '$and', branches: unknown): EventTest | undefined {
  if (!Array.isArray(branches) || branches.length === 0) return undefined;
  const tests: EventTest[] = [];
  for (const branch of branches) {
    const test = compileEventFilter(branch);
    if (!test) return undefined;
    tests.push(test);
  }
  return combine(tests, operator === '$or');
}

/**
 * `decisive` if any test answers it ($or: true, $and: false); else undecided if any test is;
 * else the other answer.
 */
function combine(tests: EventTest[], decisive: boolean): EventTest {
  return (event) => {
    let undecided = false;
    for (const test of tests) {
      const result = test(event);
      if (result === decisive) return decisive;
      if (result === undefined) undecided = true;
    }
    return undecided ? undefined : !decisive;
  };
}

/** A test of one resolved value (never an array: those are undecided before). */
type ValueTest = (value: unknown) => boolean;

function compileField(path: string, condition: unknown): EventTest | undefined {
  const segments = path.split('.');
  if (segments.some((segment) => segment === '')) return undefined;
  const valueTest = compileCondition(condition);
  if (!valueTest) return undefined;
  return (event) => {
    const value = resolve(event, segments);
    return value === UNDECIDED ? undefined : valueTest(value);
  };
}

function compileCondition(condition: unknown): ValueTest | undefined {
  if (isScalarLiteral(condition)) return (value) => value === condition;
  if (!isPlainObject(condition)) return undefined;
  const names = Object.keys(condition);
  if (names.length === 0) return undefined;
  const tests: ValueTest[] = [];
  for (const name of names) {
    const test = compileOperator(name, condition[name]);
    if (!test) return undefined;
    tests.push(test);
  }
  return (value) => tests.every((test) => test(value));
}

function compileOperator(name: string, operand: unknown): ValueTest | undefined {
  switch (name) {
    case '$eq':
      return isScalarLiteral(operand) ? (value) => value === operand : undefined;
    case '$in': {
      if (!Array.isArray(operand) || !operand.every((item) => typeof item === 'string')) {
        return undefined;
      }
      const strings = new Set<unknown>(operand);
      return (value) => typeof value === 'string' && strings.has(value);
    }
    case '$exists':
      if (typeof operand !== 'boolean') return undefined;
      return operand ? (value) => value !== undefined : (value) => value === undefined;
    case '$type':
      return operand === 'null' ? (value) => value === null : undefined;
    default:
      return undefined;
  }
}

/** Strings and booleans compare by value and type alone (numbers compare across types). */
function isScalarLiteral(value: unknown): value is string | boolean {
  return typeof value === 'string' || typeof value === 'boolean';
}

/** mingo's test, as the rest of the engine uses it: an object of no class but Object's. */
function isPlainObject(value: unknown): value is Document {
  return typeOf(value) === 'object';
}

const UNDECIDED = Symbol('undecided');

/**
 * The value at `segments` (undefined when missing), or UNDECIDED where the path meets an
 * array, or anything but a plain object, a scalar or nothing on its way.
 */
function resolve(event: Document, segments: string[]): unknown {
  let current: unknown = event;
  for (const segment of segments) {
    // Nothing, a string, a number or a boolean has no fields.
    if (current === undefined || current === null || typeof current !== 'object') return undefined;
    if (!isPlainObject(current)) return UNDECIDED;
    current = Object.prototype.hasOwnProperty.call(current, segment) ? current[segment] : undefined;
  }
  return Array.isArray(current) ? UNDECIDED : current;
}
