import { Decimal128, type Document, Long, ObjectId, Timestamp, serialize } from 'bson';
import { Aggregator } from 'mingo/aggregator';
import { DocumentLineFields } from '../../../lib/store/documents/document-line';
import { exclusiveTryJoinPipeline } from '../../../lib/store/line/line-pipelines';
import { LINE_STATE_PROJECTION, holdingCountExpression } from '../../../lib/store/line/line-state';
import { prepareUpdatePipeline } from '../engine/compiled-pipeline';
import { decodeBson } from '../wire/bson-decoder';
import { evalExpr } from 'mingo/core';
import { Query } from 'mingo/query';
import type { Options } from 'mingo/types';
import { applyUpdate, idFirst } from '../engine/apply-update';
import { canonicalKey, cloneDocument } from '../engine/bson-values';
import {
  type Evaluate,
  ShapeWriter,
  compileExpression,
  writeShape,
} from '../engine/compiled-expressions';
import { updatePipelineCache } from '../engine/compiled-pipeline';
import { projectionCache } from '../engine/compiled-projection';
import { commandMingoOptions } from '../engine/mingo-options';
import { projectDocuments } from '../engine/project';
import { bindSystemVariables } from '../engine/system-variables';
import { type SentUpdate, documentLockStages, lockCollectionUpdates } from './lock-library';

// Differential tests: the compiled forms must give exactly what mingo gives (value, type, or
// error message) on every input, including awkward ones.

const NOW = new Date('2026-11-22T10:00:00.000Z');
/** `limit`, and the `let` values engine v2's commands send (token, holder, lease, permits...). */
const variables: Document = {
  NOW,
  CLUSTER_TIME: new Timestamp({ t: 5, i: 1 }),
  limit: 3,
  t: 't2',
  h: 'h1',
  d: 30_000,
  g: 90_000,
  n: 3,
  w: 2,
  s: 'tenant',
  i: 60_000,
  l: '* wake',
};
const options = commandMingoOptions(variables);

const VALUES: unknown[] = [
  undefined,
  null,
  0,
  -0,
  1,
  2.5,
  -3,
  NaN,
  Infinity,
  2 ** 53 + 2,
  2147483648,
  'str',
  '',
  '$notAPath',
  true,
  false,
  new Date(0),
  new Date(1_800_000_000_000),
  [],
  [1, 2],
  [null],
  [[1], 3],
  [new Date(5)],
  { b: 1 },
  {},
  new ObjectId('5f0c0c0c0c0c0c0c0c0c0c0c'),
  /re/i,
  Long.fromString('9223372036854775807'),
  Decimal128.fromString('1.5'),
  Decimal128.fromString('-0.25'),
  Decimal128.fromString('NaN'),
  [Decimal128.fromString('3'), 2],
  new Timestamp({ t: 1, i: 2 }),
];

const DOCUMENTS: Document[] = VALUES.map((value, i) => {
  const document: Document = { _id: i, b: VALUES[(i * 7 + 3) % VALUES.length] };
  if (value !== undefined) document.a = value;
  return document;
});

const OPERANDS: unknown[] = [
  '$a',
  '$b',
  '$missing',
  '$a.b',
  1,
  0.4,
  0,
  -2.5,
  '',
  'x',
  null,
  true,
  new Date(10),
  [1, '$a'],
  { $literal: '$a' },
  '$$NOW',
  '$$CLUSTER_TIME',
  '$$ROOT',
  '$$limit',
  { $concat: ['x', 'y'] },
  { k: '$a' },
  { $add: ['$a', 1] },
  Decimal128.fromString('2.50'),
];

const BINARY = ['$eq', '$ne', '$lt', '$lte', '$gt', '$gte', '$subtract'];
const VARIADIC = ['$add', '$max', '$min', '$sum', '$or', '$and', '$ifNull'];
const UNARY = ['$not', '$toLong', '$type'];

function expressions(): unknown[] {
  const result: unknown[] = [...OPERANDS];
  const pairs = OPERANDS.filter((_, i) => i % 2 === 0 || i < 6);
  for (const op of BINARY) {
    for (const left of pairs) for (const right of pairs) result.push({ [op]: [left, right] });
  }
  for (const op of VARIADIC) {
    result.push({ [op]: [] });
    for (const first of OPERANDS) {
      result.push({ [op]: [first] });
      result.push({ [op]: [first, '$b', 5] });
      result.push({ [op]: ['$a', first] });
    }
    result.push({ [op]: '$a' });
  }
  for (const op of UNARY) {
    for (const operand of OPERANDS) {
      result.push({ [op]: operand });
      result.push({ [op]: [operand] });
    }
  }
  for (const condition of OPERANDS) {
    result.push({ $cond: [condition, 'yes', '$b'] });
    result.push({ $cond: { if: condition, then: '$a', else: { $literal: 'no' } } });
  }
  result.push(
    { $cond: ['$a', 1] },
    { $cond: { if: true, then: 1 } },
    { $not: [] },
    { $not: [1, 2] },
  );
  // Object literals that differ only in their keys.
  result.push({ x: '$a' }, { k: '$b', j: 1 }, { j: '$b', k: 1 }, { $max: [{ x: 1 }, { y: 1 }] });
  // Forms like the lock library's (engine v2's own are compared below, on its documents).
  result.push(
    { $max: [{ $add: ['$a', 1] }, { $toLong: '$$NOW' }] },
    { $max: [0, { $subtract: [{ $ifNull: ['$b', '$$NOW'] }, '$$NOW'] }] },
    { $add: ['$$NOW', 30_000] },
    { $cond: [{ $or: [{ $eq: ['$a', '$$limit'] }, { $not: ['$b'] }] }, '$b', '$a'] },
  );
  return result;
}

type Outcome = { value: unknown } | { error: string };

/** Exact sameness: Object.is for primitives and dates' times, key order included for objects. */
function same(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (a instanceof Date || b instanceof Date) {
    return a instanceof Date && b instanceof Date && Object.is(a.getTime(), b.getTime());
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((item, i) => same(item, b[i]))
    );
  }
  if (!a || !b || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  const keysA = Object.keys(a);
  const keysB = Object.keys(b);
  return (
    keysA.length === keysB.length &&
    keysA.every((key, i) => key === keysB[i] && same((a as Document)[key], (b as Document)[key]))
  );
}

function sameOutcome(a: Outcome, b: Outcome): boolean {
  if ('error' in a || 'error' in b) return 'error' in a && 'error' in b && a.error === b.error;
  return same(a.value, b.value);
}

function outcome(run: () => unknown): Outcome {
  try {
    return { value: run() };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

function viaMingo(expression: unknown, document: Document): Outcome {
  return outcome(() =>
    evalExpr(document, bindSystemVariables(expression, variables), options as Options),
  );
}

/**
 * Compiles each expression (once per shape) and compares it with mingo on every document;
 * returns how many comparisons and how many compiled forms there were.
 */
function compareWithMingo(
  all: unknown[],
  documents: Document[],
): { compared: number; compiled: number } {
  const compiledByShape = new Map<string, Evaluate>();
  let compared = 0;
  for (const expression of all) {
    const shape = new ShapeWriter(variables);
    writeShape(expression, shape);
    if (shape.unsupported) throw new Error(`not compiled: ${JSON.stringify(expression)}`);
    let evaluate = compiledByShape.get(shape.key);
    if (!evaluate) {
      const slots = { next: 0 };
      evaluate = compileExpression(expression, slots);
      // The compiled form reads exactly the parameters the shape walk collected.
      expect(slots.next).toBe(shape.params.length);
      compiledByShape.set(shape.key, evaluate);
    }
    const bindings = { params: shape.params, variables, options };
    for (const document of documents) {
      const expected = viaMingo(expression, document);
      const actual = outcome(() => evaluate(document, bindings));
      if (!sameOutcome(actual, expected)) {
        throw new Error(
          `${JSON.stringify(expression)} on ${JSON.stringify(document)}: ` +
            `${JSON.stringify(actual)} but mingo gives ${JSON.stringify(expected)}`,
        );
      }
      compared += 1;
    }
  }
  return { compared, compiled: compiledByShape.size };
}

describe('compiled expressions (differential against mingo)', () => {
  it('give the value or error mingo gives, with compiled forms shared by shape', () => {
    const { compared, compiled } = compareWithMingo(expressions(), DOCUMENTS);
    expect(compared).toBeGreaterThan(30_000);
    // Literals are parameters: far fewer compiled forms than expressions.
    expect(compiled).toBeLessThan(expressions().length);
  });

  it('keeps literal values and field paths out of the shape', () => {
    const shapeOf = (expression: unknown): string => {
      const shape = new ShapeWriter(variables);
      writeShape(expression, shape);
      return shape.key;
    };
    expect(shapeOf({ $eq: ['$owner', 'token-1'] })).toBe(shapeOf({ $eq: ['$owner', 'token-2'] }));
    expect(shapeOf({ $add: ['$$NOW', 1000] })).toBe(shapeOf({ $add: ['$$NOW', 30_000] }));
    expect(shapeOf({ $eq: ['$owner', 'x'] })).toBe(shapeOf({ $eq: ['$holders.h1.owner', 'x'] }));
    // A path is still not a literal, nor a variable.
    expect(shapeOf({ $eq: ['$owner', 'x'] })).not.toBe(shapeOf({ $eq: ['$owner', '$x'] }));
    expect(shapeOf({ $eq: ['$owner', 'x'] })).not.toBe(shapeOf({ $eq: ['$$ROOT', 'x'] }));
    expect(shapeOf({ $cond: [true, 1, 2] })).not.toBe(
      shapeOf({ $cond: { if: true, then: 1, else: 2 } }),
    );
  });

  it('reads the path of the command it runs for, not of the one it was compiled from', () => {
    const compiledFrom = { $eq: ['$a.b', 1] };
    const evaluate = compileExpression(compiledFrom, { next: 0 });
    const runFor = (expression: unknown): unknown => {
      const shape = new ShapeWriter(variables);
      writeShape(expression, shape);
      return evaluate({ a: { b: 1, c: 2 } }, { params: shape.params, variables, options });
    };
    expect(runFor(compiledFrom)).toBe(true);
    expect(runFor({ $eq: ['$a.c', 1] })).toBe(false);
    expect(runFor({ $eq: ['$a.c', 2] })).toBe(true);
  });

  it('skips null and missing values in `$max` and `$min`, as MongoDB does', () => {
    const evaluate = (expression: unknown) =>
      evalExpr({ a: 3 }, bindSystemVariables(expression, variables), options as Options);
    const compiled = (expression: unknown) => {
      const shape = new ShapeWriter(variables);
      writeShape(expression, shape);
      return compileExpression(expression, { next: 0 })(
        { a: 3 },
        { params: shape.params, variables, options },
      );
    };
    for (const run of [evaluate, compiled]) {
      expect(run({ $max: ['$missing', '$a'] })).toBe(3);
      expect(run({ $max: ['$a', null, '$missing'] })).toBe(3);
      expect(run({ $min: ['$missing', '$a'] })).toBe(3);
      expect(run({ $max: ['$missing', null] })).toBeNull();
      // One operand that is not an array: over that one value (mingo alone refuses it).
      expect(run({ $max: '$missing' })).toBeNull();
      expect(run({ $max: '$a' })).toBe(3);
      expect(run({ $min: { $add: ['$a', 1] } })).toBe(4);
      expect(run({ $sum: '$a' })).toBe(3);
      expect(run({ $sum: 'text' })).toBe(0);
    }
  });

  it('leaves `$$NOW.<path>` to mingo as a whole', () => {
    for (const expression of ['$$NOW.x', { $add: ['$$NOWx', 1] }, { $concat: ['$$NOW.y'] }]) {
      const shape = new ShapeWriter(variables);
      writeShape(expression, shape);
      expect(shape.unsupported).toBe(true);
    }
  });
});

/** Values of the shapes arrays and maps of entries take (engine v2's line among them), and awkward ones. */
const ARRAY_VALUES: unknown[] = [
  ...VALUES,
  [
    { t: 't1', f: 5, e: new Date(NOW.getTime() + 900), h: 'h1' },
    { t: 't2', f: 6, e: new Date(NOW.getTime() - 1), h: 'h2', m: 's', w: 2, sc: 'tenant' },
  ],
  [
    { k: 'r1', v: { weight: 1, since: new Date(5) } },
    { k: 'r2', v: { holder: 'h' } },
  ],
  [{ k: 'x' }],
  [{ k: 'x', v: undefined }],
  [['x', 1]],
  [{ k: 1, v: 2 }, null],
  { r1: { weight: 1000, since: new Date(1), expiresAt: new Date(2) }, r2: { holder: null } },
  { x: { y: [1, 2] }, z: undefined },
  [
    [1, 2],
    [3, null],
  ],
  [3, 1, 2, 'x', ''],
];

const ARRAY_DOCUMENTS: Document[] = ARRAY_VALUES.map((value, i) => {
  const document: Document = { _id: i, b: ARRAY_VALUES[(i * 5 + 2) % ARRAY_VALUES.length] };
  if (value !== undefined) document.a = value;
  return document;
});

function arrayExpressions(): unknown[] {
  const result: unknown[] = [];
  const operands = [...OPERANDS, '$a.k', '$a.v', { $objectToArray: '$a' }, ['$a'], [1, [2]]];
  for (const x of operands) {
    result.push(
      { $size: x },
      { $objectToArray: x },
      { $arrayToObject: x },
      { $in: [1, x] },
      { $in: [x, [1, '$a', null]] },
      { $in: [{ k: 'x' }, x] },
      { $concatArrays: [x, [1]] },
      { $concatArrays: ['$a', x] },
      { $concatArrays: [] },
      { $mergeObjects: [x, { z: 1 }] },
      { $mergeObjects: ['$a', x, null] },
      { $concat: ['x', x] },
      { $concat: [x, null, 1] },
      { $arrayElemAt: [x, 0] },
      { $arrayElemAt: ['$a', x] },
      { $arrayElemAt: ['$a', -1] },
      { $slice: [x, 1] },
      { $slice: ['$a', x] },
      { $slice: ['$a', -2, x] },
      { $slice: ['$a', x, 1] },
      { $slice: ['$a', 1, null] },
      { $filter: { input: x, cond: { $ne: ['$$this', null] } } },
      { $filter: { input: x, as: 'e', cond: '$$e' } },
      { $filter: { input: '$a', as: '', cond: x } },
      { $map: { input: x, in: { $type: '$$this' } } },
      { $map: { input: x, as: 'e', in: ['$$e', '$b', '$$e.k'] } },
      { $map: { input: '$a', in: x } },
      { $reduce: { input: x, initialValue: 0, in: { $add: ['$$value', 1] } } },
      { $reduce: { input: '$a', initialValue: x, in: { $concatArrays: ['$$value', ['$$this']] } } },
      { $reduce: { input: '$a', initialValue: [], in: x } },
      { $reduce: { input: '$a', initialValue: 0, in: { $max: ['$$value', x] } } },
      { $max: x },
      { $min: x },
      { $sum: x },
      { $sum: [x, 1, '$a'] },
      { $let: { vars: { v: x }, in: { $ifNull: ['$$v.k', '$$v'] } } },
      { $let: { vars: { v: '$a', w: x }, in: ['$$v', '$$w', '$b'] } },
    );
  }
  result.push(
    // Scopes: the same name nested, `$$this` of an outer `$map` inside `$reduce` (mingo keeps
    // the outer one), a `$let` inside a `$filter`, subtrees mingo evaluates with variables.
    { $map: { input: '$a', in: { $map: { input: '$b', in: ['$$this', 1] } } } },
    {
      $map: {
        input: '$a',
        as: 'o',
        in: [{ $map: { input: '$a', as: 'o', in: { $concat: ['$$o', '-'] } } }, '$$o'],
      },
    },
    {
      $map: {
        input: '$a',
        in: { $reduce: { input: '$b', initialValue: [], in: ['$$value', '$$this'] } },
      },
    },
    {
      $filter: {
        input: '$a',
        as: 'e',
        cond: { $let: { vars: { e: { $size: '$b' }, f: '$$e' }, in: { $eq: ['$$e', '$$f'] } } },
      },
    },
    { $filter: { input: '$a', cond: { $isArray: '$$this' } } },
    { $map: { input: '$a', in: { $abs: '$$this' } } },
    { $map: { input: '$a', in: { $multiply: ['$$this', '$$limit'] } } },
    { $let: { vars: { r: '$$ROOT' }, in: { $size: { $objectToArray: '$$r' } } } },
    { $map: { input: '$a', in: '$$this.__proto__' } },
    // Deeper forms: a map's entries rewritten, the earliest one, some dropped.
    {
      $arrayToObject: {
        $map: {
          input: { $objectToArray: { $ifNull: ['$a', {}] } },
          in: {
            $cond: [
              { $eq: ['$$this.k', 'r1'] },
              { k: '$$this.k', v: { $mergeObjects: ['$$this.v', { since: '$$NOW' }] } },
              '$$this',
            ],
          },
        },
      },
    },
    {
      $let: {
        vars: {
          head: {
            $reduce: {
              input: { $objectToArray: { $ifNull: ['$a', {}] } },
              initialValue: null,
              in: {
                $cond: [
                  { $eq: ['$$value', null] },
                  '$$this',
                  { $cond: [{ $lt: ['$$this.v.since', '$$value.v.since'] }, '$$this', '$$value'] },
                ],
              },
            },
          },
        },
        in: { $ifNull: ['$$head.v.holder', null] },
      },
    },
    {
      $arrayToObject: {
        $filter: {
          input: { $objectToArray: '$a' },
          cond: { $not: [{ $in: ['$$this.k', { $ifNull: ['$b', []] }] }] },
        },
      },
    },
  );
  return result;
}

describe('compiled array and variable operators (differential against mingo)', () => {
  it('give the value or error mingo gives, variables in scope included', () => {
    const { compared } = compareWithMingo(arrayExpressions(), ARRAY_DOCUMENTS);
    expect(compared).toBeGreaterThan(30_000);
  });

  it('are compiled as a whole, names bound from literals being part of the shape', () => {
    const shapeOf = (expression: unknown) => {
      const shape = new ShapeWriter(variables);
      writeShape(expression, shape);
      expect(shape.unsupported).toBe(false);
      return shape;
    };
    const filter = (as: string) => ({ $filter: { input: '$a', as, cond: `$$${as}` } });
    expect(shapeOf(filter('x')).key).not.toBe(shapeOf(filter('y')).key);
    // `$$this` is a variable where an operator binds it, a mingo subtree elsewhere.
    expect(shapeOf({ $map: { input: '$a', in: '$$this' } }).key).toContain('"$$this"');
    expect(shapeOf('$$this').key).not.toContain('"$$this"');
  });

  it("leave `$$CURRENT` inside a bound scope to mingo as a whole ($reduce's is the element)", () => {
    const expression = { $reduce: { input: '$a', initialValue: 0, in: '$$CURRENT' } };
    const shape = new ShapeWriter(variables);
    writeShape(expression, shape);
    expect(shape.unsupported).toBe(true);
  });
});

const at = (ms: number) => new Date(NOW.getTime() + ms);

/** Engine v2's line entries (`line-document.ts`): live and dead, of every kind, scoped or not. */
const ENTRIES = {
  t1: { t: 't1', f: 1_700_000_000_005, e: at(9_000), h: 'h1' },
  t2: { t: 't2', f: 1_700_000_000_006, e: at(9_000), h: 'h2', sc: 'tenant' },
  dead: { t: 't3', f: 1_700_000_000_004, e: at(-1), h: 'h3' },
  ends: { t: 't4', f: 1_700_000_000_007, e: NOW, h: 'h1' },
  s1: { t: 's1', f: 1_700_000_000_010, e: at(4_000), h: 'h1', m: 's' },
  s2: { t: 's2', f: 1_700_000_000_011, e: at(5_000), h: 'h2', m: 's', sc: 'tenant' },
  w2: { t: 'w2', f: 1_700_000_000_020, e: at(4_000), h: 'h2', w: 2 },
  w1: { t: 'w1', f: 1_700_000_000_021, e: at(6_000), h: 'h1' },
};

/**
 * Lock documents of engine v2 in the states its commands meet (fences as the server holds
 * them once decoded: numbers), and a few a command should never meet but may.
 */
const LINE_DOCUMENTS: Document[] = [
  { _id: 'k' },
  { _id: 'k', f: 1_700_000_000_003, line: [], gcAt: at(1_000) },
  { _id: 'k', f: 1_700_000_000_003, line: [ENTRIES.dead], gcAt: at(-5), lead: 'h2 t9' },
  { _id: 'k', f: 1_700_000_000_007, line: [ENTRIES.t1, ENTRIES.t2], gcAt: at(99_000) },
  { _id: 'k', f: 1_700_000_000_007, line: [ENTRIES.dead, ENTRIES.t2, ENTRIES.ends], lead: null },
  { _id: 'k', f: 1_700_000_000_011, line: [ENTRIES.s1, ENTRIES.s2, ENTRIES.t1], lead: '* t8' },
  { _id: 'k', f: 1_700_000_000_011, line: [ENTRIES.s1, ENTRIES.t2, ENTRIES.s2] },
  { _id: 'k', f: 1_700_000_000_021, permits: 3, line: [ENTRIES.w2, ENTRIES.w1, ENTRIES.t2] },
  { _id: 'k', f: 1_700_000_000_021, permits: 5, line: [ENTRIES.w1], tx: new ObjectId() },
  // The clock behind the last fence (a busy key), and a line at its capacity.
  { _id: 'k', f: NOW.getTime() + 50, line: [ENTRIES.t1], gcAt: at(2_000) },
  {
    _id: 'k',
    f: 1_700_000_000_999,
    line: Array.from({ length: 1_000 }, (_, i) => ({ ...ENTRIES.t1, t: `q${i}`, f: i })),
  },
];

/**
 * Application documents with a document lock in the field `lock` (`document-line.ts`): none,
 * a line, dead entries only, and the 0.1 form (live and ended).
 */
const LOCKED_DOCUMENTS: Document[] = [
  { _id: 'k', name: 'a' },
  {
    _id: 'k',
    name: 'a',
    lock: { f: 1_700_000_000_007, line: [ENTRIES.t1, ENTRIES.t2], lead: null },
  },
  { _id: 'k', lock: { f: 1_700_000_000_007, line: [ENTRIES.dead], lead: 'h3 t3' } },
  { _id: 'k', lock: { f: 1_700_000_000_007, line: [ENTRIES.t2], lead: 'h2 t2' } },
  { _id: 'k', lock: { owner: 'o1', holder: 'h0', fence: 4, expiresAt: at(3_000) } },
  { _id: 'k', lock: { owner: 'o1', holder: 'h0', fence: 4, expiresAt: at(-3_000) } },
  { _id: 'k', lock: null },
];

/** Every expression of the stages `pipeline` sets (or replaces the document with). */
function stageExpressions(pipeline: Document[]): unknown[] {
  return pipeline.flatMap((stage) =>
    stage.$set
      ? Object.values(stage.$set as Document)
      : stage.$replaceWith
        ? [stage.$replaceWith]
        : [],
  );
}

/** Engine v2's expressions: those of its update pipelines, its projections and its filters. */
async function lockExpressions(): Promise<unknown[]> {
  const sent = await lockCollectionUpdates(['t2', 'tn']);
  const fields = new DocumentLineFields('lock');
  const all = [
    ...sent.flatMap((update) => stageExpressions(update.pipeline)),
    ...sent.flatMap((update) => (update.filter.$expr ? [update.filter.$expr] : [])),
    ...stageExpressions(documentLockStages('lock', 't2')),
    ...Object.values(LINE_STATE_PROJECTION).filter((value) => value !== 1),
    holdingCountExpression('$line'),
    fields.held,
    fields.holder,
    fields.remainingMs,
    fields.ownedBy('t2'),
  ];
  // Each once (joins of several kinds share most of them).
  return [...new Map(all.map((expression) => [JSON.stringify(expression), expression])).values()];
}

describe("compiled forms of the lock library's own expressions (differential against mingo)", () => {
  it("give what mingo gives on engine v2's documents, every one compiled", async () => {
    const expressions = await lockExpressions();
    const { compared } = compareWithMingo(expressions, [...LINE_DOCUMENTS, ...LOCKED_DOCUMENTS]);
    expect(expressions.length).toBeGreaterThan(30);
    expect(compared).toBe(expressions.length * (LINE_DOCUMENTS.length + LOCKED_DOCUMENTS.length));
  });
});

describe('compiled update pipelines (differential against mingo)', () => {
  const context = {
    now: NOW,
    clusterTime: variables.CLUSTER_TIME as Timestamp,
    filter: {},
    mingo: options,
  };
  // A document lock's join: the call's values are literals in the stage.
  const documentJoin = (token: string, ttlMs: number): Document[] => [
    new DocumentLineFields('lock').joinStage({ token, holderId: 'h1', ttlMs, onlyIfHolds: false }),
  ];
  const pipelines: Document[][] = [
    documentJoin('owner-a', 30_000),
    documentJoin('owner-b', 0),
    [{ $set: { 'nested.x': '$a', gone: '$missing', a: { $add: ['$a', 1] } } }],
    [{ $addFields: { x: 1 } }, { $set: { y: '$x', a: '$$REMOVE' } }],
    [{ $set: {} }],
    [{ $set: { _id: 'changed' } }],
    [{ $set: { a: { $concat: ['$a', 'x'] } } }],
    [{ $set: { a: { $literal: { $add: [1] } } } }],
  ];
  const documents: Document[] = [
    { _id: 'k' },
    { _id: 'k', lock: { f: 3, line: [], lead: null } },
    { _id: 'k', lock: { f: 7, line: [{ t: 'someone', f: 7, e: at(5000), h: 'h2' }] } },
    { _id: 'k', lock: { owner: 'someone', expiresAt: NOW }, nested: { y: 1 }, a: 'text' },
    { _id: 'k', a: 5, nested: 4 },
  ];

  /** What applyUpdate did before compiled pipelines: mingo's Aggregator, then the _id rules. */
  function viaAggregator(
    original: Document,
    pipeline: Document[],
    commandOptions = options,
  ): Outcome {
    return outcome(() => {
      const bound = bindSystemVariables(pipeline, commandOptions.variables ?? {});
      let result = new Aggregator(bound, commandOptions).run<Document>([
        cloneDocument(original),
      ])[0];
      if (!('_id' in result) && '_id' in original) result = { _id: original._id, ...result };
      if ('_id' in original && canonicalKey(original._id) !== canonicalKey(result._id)) {
        throw new Error(
          "Performing an update on the path '_id' would modify the immutable field '_id'",
        );
      }
      return idFirst(result);
    });
  }

  /** A command's `let` values as the server evaluates them, with NOW and CLUSTER_TIME. */
  function commandOptions(lets: Document) {
    const system = { NOW, CLUSTER_TIME: variables.CLUSTER_TIME };
    const values: Document = {};
    for (const [name, expression] of Object.entries(lets)) {
      values[name] = evalExpr({}, bindSystemVariables(expression, system), options as Options);
    }
    return commandMingoOptions({ ...system, ...values });
  }

  /** As the server receives it: over BSON (fences promoted to numbers, `$literal` kept). */
  function overBson(update: { pipeline: Document[]; let: Document }) {
    const decoded = decodeBson(Buffer.from(serialize(update)));
    return { pipeline: decoded.pipeline as Document[], let: decoded.let as Document };
  }

  it('run the lock’s own join, leave, renew and operator pipelines compiled, as mingo’s Aggregator does', async () => {
    // Tokens: new to every line, in some lines already (a retry; a leave or renewal of
    // ours), and one that starts with `$` (sent as a `$literal`).
    const sent: SentUpdate[] = await lockCollectionUpdates(['tn', 't2', 's2', '$t']);
    // A mutex's `tryAcquire` is one `$replaceWith` stage, which the server runs through
    // mingo's Aggregator itself: nothing compiled to compare (its expression is, above).
    const viaAggregatorOnly = new Set([
      exclusiveTryJoinPipeline(false),
      exclusiveTryJoinPipeline(true),
    ]);
    const commands = [
      ...sent
        .filter((update) => !viaAggregatorOnly.has(update.pipeline))
        .map((update) => ({ call: update.call, ...overBson(update), states: LINE_DOCUMENTS })),
      ...documentLockStages('lock', 't2').map((stage) => ({
        call: `document lock ${Object.keys(stage)[0]}`,
        ...overBson({ pipeline: [stage], let: {} }),
        states: LOCKED_DOCUMENTS,
      })),
    ];
    // Every kind of call is there: joins of three kinds, leave, renew, the operator commands.
    const calls = new Set(sent.map((update) => update.call.split(' ')[0]));
    expect([...calls].sort()).toEqual([
      'expire',
      'forceRelease',
      'join',
      'leave',
      'releaseScope',
      'renew',
    ]);
    expect(new Set(sent.map((update) => update.pipeline)).size).toBeGreaterThan(16);
    let runs = 0;
    for (const { call, pipeline, let: lets, states } of commands) {
      const commandMingo = commandOptions(lets);
      expect(prepareUpdatePipeline(pipeline, commandMingo)).toBeDefined();
      for (const document of states) {
        const expected = viaAggregator(document, pipeline, commandMingo);
        const actual = outcome(() =>
          applyUpdate(document, pipeline, { ...context, mingo: commandMingo }),
        );
        if (!('value' in expected) || !sameOutcome(actual, expected)) {
          throw new Error(
            `${call}: ${JSON.stringify(pipeline)} with ${JSON.stringify(lets)} on ` +
              `${JSON.stringify(document)}: ${JSON.stringify(actual)} but mingo gives ` +
              JSON.stringify(expected),
          );
        }
        runs += 1;
      }
    }
    // Every command ran on every state, none compared by its error alone.
    expect(runs).toBe(commands.reduce((sum, command) => sum + command.states.length, 0));
  });

  it('update like mingo’s Aggregator and reuse the compiled form across literal values', () => {
    updatePipelineCache.clear();
    for (const pipeline of pipelines) {
      for (const document of documents) {
        const expected = viaAggregator(document, pipeline);
        const actual = outcome(() => applyUpdate(document, pipeline, context));
        if (!sameOutcome(actual, expected)) {
          throw new Error(
            `${JSON.stringify(pipeline)} on ${JSON.stringify(document)}: ` +
              `${JSON.stringify(actual)} but mingo gives ${JSON.stringify(expected)}`,
          );
        }
      }
    }
    expect(updatePipelineCache.hits).toBeGreaterThan(0);
  });
});

describe('compiled projections (differential against mingo)', () => {
  const projections: Document[] = [
    {
      owner: 1,
      holder: 1,
      fence: 1,
      remainingMs: { $max: [0, { $subtract: [{ $ifNull: ['$expiresAt', '$$NOW'] }, '$$NOW'] }] },
    },
    { _id: 0, remainingMs: { $subtract: ['$expiresAt', '$$NOW'] } },
    {
      _id: 0,
      ours: { $eq: ['$owner', 'owner-a'] },
      remainingMs: { $subtract: ['$expiresAt', '$$NOW'] },
    },
    {
      _id: 0,
      ours: { $eq: ['$owner', 'owner-b'] },
      remainingMs: { $subtract: ['$expiresAt', '$$NOW'] },
    },
    { a: 0 },
    { a: 0, _id: 0 },
    { _id: 0 },
    { _id: 1 },
    { a: true, b: 5 },
    { a: 1, b: 0 },
    { _id: 1, a: 0 },
    { x: '$a', y: 'literal', z: '$$NOW', w: '$missing' },
    { x: { $literal: 1 }, _id: '$a' },
    { a: { $slice: 1 } },
    { 'nested.y': 1 },
    { a: { b: 1 } },
    { constructor: 1 },
    { a: NaN },
    { a: null },
  ];
  const documents: Document[] = [
    { _id: 'k', owner: 'owner-a', holder: 'h', fence: 3, expiresAt: new Date(NOW.getTime() + 500) },
    { _id: 'k', owner: null, a: [1, 2, 3], nested: { y: 2, z: 3 }, b: 'x' },
    { a: 1, b: 2 },
    { _id: 'k', expiresAt: 'not a date' },
  ];

  function viaQuery(projection: Document): Outcome {
    return outcome(() =>
      new Query({}, options)
        .find<Document>(documents, bindSystemVariables(projection, variables) as never)
        .all()
        .map((projected) => ({ ...projected })),
    );
  }

  it('project like mingo (values and which fields exist) and reuse forms across literals', () => {
    projectionCache.clear();
    for (const projection of projections) {
      const expected = viaQuery(projection);
      const actual = outcome(() => projectDocuments(documents, projection, options));
      if ('error' in expected) {
        expect(actual).toStrictEqual({ error: expected.error });
        continue;
      }
      expect('value' in actual).toBe(true);
      const values = (actual as { value: Document[] }).value;
      // projectDocuments reorders fields the way MongoDB does; compare as sets of fields.
      const sorted = (document: Document) =>
        Object.fromEntries(Object.entries(document).sort(([a], [b]) => a.localeCompare(b)));
      const expectedValues = expected.value as Document[];
      expect(
        sameOutcome({ value: values.map(sorted) }, { value: expectedValues.map(sorted) }),
      ).toBe(true);
    }
    expect(projectionCache.hits).toBeGreaterThan(0);
  });
});
