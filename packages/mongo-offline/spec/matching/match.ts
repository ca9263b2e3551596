// The unified test format's matching rules ("Evaluating Matches"): extra fields are allowed only in
// root-level documents, arrays must have the same length, numbers compare by value, and `$$`
// operators replace a value with an assertion.
import { EJSON } from 'bson';
import { inspect } from 'node:util';
import { bsonTypeOf, bytesOf, hasBsonType, isDocument, numericValue } from './bson-kind';

/** What `$$matchesEntity` and `$$sessionLsid` look up. */
export interface MatchEntities {
  entityValue(name: string): unknown;
  sessionLsid(name: string): unknown;
}

export interface MatchOptions {
  /** Whether `actual` is a root-level document (extra fields allowed). */
  root?: boolean;
  /** Whether `actual` is an array of root-level documents (a find or aggregate result). */
  rootElements?: boolean;
  /**
   * Numbers must also have the same BSON type (collection contents "match exactly"); `actual`
   * must then be read with `promoteValues: false` so that its types are visible.
   */
  exactNumberTypes?: boolean;
  entities?: MatchEntities;
  /** Where `actual` sits, for messages. */
  path?: string;
}

interface MatchState {
  entities?: MatchEntities;
  exactNumberTypes?: boolean;
  mismatches: string[];
}

const MAX_MISMATCHES = 10;

/** Returns the mismatches found (empty when `actual` matches `expected`). */
export function findMismatches(expected: unknown, actual: unknown, options: MatchOptions = {}) {
  const { entities, exactNumberTypes } = options;
  const state: MatchState = { entities, exactNumberTypes, mismatches: [] };
  const path = options.path ?? '$';
  if (options.rootElements && Array.isArray(expected)) {
    if (!Array.isArray(actual)) fail(state, path, `is ${describe(actual)}, expected an array`);
    else if (actual.length !== expected.length) {
      fail(state, path, `has ${actual.length} elements, expected ${expected.length}`);
    } else expected.forEach((e, i) => matchValue(e, actual[i], `${path}[${i}]`, true, state));
  } else {
    matchValue(expected, actual, path, options.root ?? false, state);
  }
  return state.mismatches;
}

/** Throws with every mismatch when `actual` does not match `expected`. */
export function assertMatches(expected: unknown, actual: unknown, options: MatchOptions = {}) {
  const mismatches = findMismatches(expected, actual, options);
  if (mismatches.length > 0) {
    throw new Error(
      `${mismatches.join('\n')}\n  expected: ${describe(expected)}\n  actual:   ${describe(actual)}`,
    );
  }
}

/** The `$$` operator of a single-key document, if it is one. */
export function specialOperatorOf(value: unknown): string | undefined {
  if (!isDocument(value)) return undefined;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0].startsWith('$$') ? keys[0] : undefined;
}

function matchValue(
  expected: unknown,
  rawActual: unknown,
  path: string,
  root: boolean,
  state: MatchState,
) {
  if (state.mismatches.length >= MAX_MISMATCHES) return;
  // The driver keeps ordered documents such as `sort` as Maps in the commands it sends.
  const actual = rawActual instanceof Map ? Object.fromEntries(rawActual) : rawActual;
  const operator = specialOperatorOf(expected);
  if (operator) {
    const argument = (expected as Record<string, unknown>)[operator];
    matchOperator(operator, argument, actual, path, root, state);
  } else if (isDocument(expected)) {
    matchDocument(expected, actual, path, root, state);
  } else if (Array.isArray(expected)) {
    matchArray(expected, actual, path, state);
  } else if (actual === undefined) {
    fail(state, path, `is missing (expected ${describe(expected)})`);
  } else if (!scalarsEqual(expected, actual)) {
    fail(state, path, `is ${describe(actual)}, expected ${describe(expected)}`);
  } else if (state.exactNumberTypes && numericValue(expected) !== undefined) {
    const [expectedType, actualType] = [bsonTypeOf(expected), bsonTypeOf(actual)];
    if (expectedType !== actualType) {
      fail(state, path, `is a ${actualType} ${describe(actual)}, expected a ${expectedType}`);
    }
  }
}

function matchDocument(
  expected: Record<string, unknown>,
  actual: unknown,
  path: string,
  root: boolean,
  state: MatchState,
) {
  if (!isDocument(actual)) {
    fail(state, path, `is ${describe(actual)}, expected a document`);
    return;
  }
  for (const [key, expectedField] of Object.entries(expected)) {
    const actualField = fieldOf(actual, key);
    const fieldPath = `${path}.${key}`;
    // `$$exists`, `$$unsetOrMatches`, `$$type` ... decide for themselves what a missing field means.
    if (actualField === undefined && !specialOperatorOf(expectedField)) {
      fail(state, fieldPath, `is missing (expected ${describe(expectedField)})`);
      continue;
    }
    matchValue(expectedField, actualField, fieldPath, false, state);
  }
  if (root) return;
  for (const key of Object.keys(actual)) {
    if (!(key in expected) && fieldOf(actual, key) !== undefined) {
      fail(state, `${path}.${key}`, `is not expected in a nested document`);
    }
  }
}

function matchArray(expected: unknown[], actual: unknown, path: string, state: MatchState) {
  if (!Array.isArray(actual)) {
    fail(state, path, `is ${describe(actual)}, expected an array`);
    return;
  }
  if (actual.length !== expected.length) {
    fail(state, path, `has ${actual.length} elements, expected ${expected.length}`);
    return;
  }
  expected.forEach((element, i) => matchValue(element, actual[i], `${path}[${i}]`, false, state));
}

function matchOperator(
  operator: string,
  argument: any,
  actual: unknown,
  path: string,
  root: boolean,
  state: MatchState,
) {
  switch (operator) {
    case '$$exists':
      if ((actual !== undefined) !== argument) {
        fail(state, path, argument ? 'is missing' : `should be absent, is ${describe(actual)}`);
      }
      return;
    case '$$unsetOrMatches':
      if (actual !== undefined) matchValue(argument, actual, path, root, state);
      return;
    case '$$type': {
      const names: string[] = Array.isArray(argument) ? argument : [argument];
      if (!hasBsonType(actual, names)) {
        fail(state, path, `is ${describe(actual)}, expected type ${names.join(' or ')}`);
      }
      return;
    }
    case '$$matchesEntity':
      matchValue(requireEntities(state).entityValue(argument), actual, path, root, state);
      return;
    case '$$sessionLsid':
      matchValue(requireEntities(state).sessionLsid(argument), actual, path, false, state);
      return;
    case '$$lte': {
      const value = numericValue(actual);
      if (value === undefined || value > (numericValue(argument) ?? NaN)) {
        fail(state, path, `is ${describe(actual)}, expected a number <= ${describe(argument)}`);
      }
      return;
    }
    case '$$matchAsDocument':
      if (typeof actual !== 'string') {
        fail(state, path, `is ${describe(actual)}, expected an Extended JSON string`);
        return;
      }
      matchValue(argument, EJSON.parse(actual, { relaxed: false }), path, false, state);
      return;
    case '$$matchAsRoot':
      matchValue(argument, actual, path, true, state);
      return;
    case '$$matchesHexBytes': {
      const bytes = bytesOf(actual);
      const hex = bytes ? Buffer.from(bytes).toString('hex') : undefined;
      if (hex !== String(argument).toLowerCase()) {
        fail(state, path, `is ${describe(actual)}, expected bytes ${String(argument)}`);
      }
      return;
    }
    default:
      throw new Error(`Unsupported special operator ${operator} at ${path}`);
  }
}

function requireEntities(state: MatchState): MatchEntities {
  if (!state.entities) throw new Error('This match needs the entity map, which was not given');
  return state.entities;
}

/** Scalars: numbers by value (except Decimal128), everything else by type and value. */
export function scalarsEqual(expected: unknown, actual: unknown): boolean {
  const expectedNumber = numericValue(expected);
  const actualNumber = numericValue(actual);
  if (expectedNumber !== undefined || actualNumber !== undefined) {
    return expectedNumber === actualNumber;
  }
  if (expected === null || typeof expected !== 'object') return expected === actual;
  if (expected instanceof Date) {
    return actual instanceof Date && actual.getTime() === expected.getTime();
  }
  const expectedBytes = bytesOf(expected);
  if (expectedBytes) {
    const actualBytes = bytesOf(actual);
    return !!actualBytes && Buffer.from(expectedBytes).equals(Buffer.from(actualBytes));
  }
  if (actual === null || typeof actual !== 'object') return false;
  return canonical(expected) === canonical(actual);
}

function canonical(value: unknown): string {
  return EJSON.stringify(value, { relaxed: false });
}

function fieldOf(document: Record<string, unknown>, key: string): unknown {
  return document[key];
}

function fail(state: MatchState, path: string, message: string) {
  if (state.mismatches.length < MAX_MISMATCHES) state.mismatches.push(`${path} ${message}`);
}

/** A short Extended JSON rendering for messages. */
export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  let text: string;
  try {
    text = EJSON.stringify(value, { relaxed: true });
  } catch {
    text = inspect(value, { depth: 4, breakLength: Infinity });
  }
  return text.length > 300 ? `${text.slice(0, 300)}...` : text;
}
