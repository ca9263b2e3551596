import * as path from 'node:path';
import type { Document } from 'bson';
import { Context, evalExpr } from 'mingo/core';
import * as accumulatorOperators from 'mingo/operators/accumulator';
import * as expressionOperators from 'mingo/operators/expression';
import * as pipelineOperators from 'mingo/operators/pipeline';
import * as projectionOperators from 'mingo/operators/projection';
import * as queryOperators from 'mingo/operators/query';
import * as windowOperators from 'mingo/operators/window';
import type { AnyObject, Options } from 'mingo/types';
import { $addFields } from './add-fields-stage';
import { normaliseCollation } from './collation';
import {
  DECIMAL_ACCUMULATOR_OPERATORS,
  DECIMAL_EXPRESSION_OPERATORS,
  DECIMAL_QUERY_OPERATORS,
} from './decimal128-operators';
import { $sort, $sortArray } from './sort-stage';

const ACCUMULATORS = { ...accumulatorOperators, ...DECIMAL_ACCUMULATOR_OPERATORS };

type Accumulator = (collection: AnyObject[], expr: unknown, options: Options) => unknown;

/**
 * An accumulator used as an expression, as MongoDB evaluates it: over its list of operands,
 * over the array its one operand resolves to, or else over that one value (`{ $max: '$x' }`
 * with `x` missing is null; mingo refuses any operand that is not an array).
 */
function accumulatorExpression(accumulate: Accumulator) {
  return (obj: AnyObject, expr: unknown, options: Options): unknown => {
    // In `$group` and its kin mingo hands an accumulator the group's documents: as before.
    if (Array.isArray(obj)) return accumulate(obj as AnyObject[], expr, options);
    const value = evalExpr(obj, expr, options);
    return accumulate(Array.isArray(value) ? value : [value], null, options);
  };
}

const ACCUMULATOR_EXPRESSIONS = Object.fromEntries(
  (['$avg', '$max', '$min', '$sum'] as const).map((name) => [
    name,
    accumulatorExpression(ACCUMULATORS[name]),
  ]),
);

/**
 * One operator table for the whole server. mingo's convenience entry points (`mingo`'s
 * Query, Aggregator, update) copy every operator table on every call, which made a
 * findAndModify cost milliseconds; the base classes used here take these options as is.
 * Arithmetic and comparison operators are mingo's made Decimal128-aware
 * (decimal128-operators.ts), and they, `$sort` and `$sortArray` order values as MongoDB (value-order.ts:
 * strings by code point, not by UTF-16 unit); mingo's updater adds its own operators without
 * replacing these.
 */
const FULL_CONTEXT = Context.init({
  accumulator: ACCUMULATORS,
  expression: {
    ...expressionOperators,
    ...DECIMAL_EXPRESSION_OPERATORS,
    ...ACCUMULATOR_EXPRESSIONS,
    $sortArray,
  },
  pipeline: { ...pipelineOperators, $addFields, $set: $addFields, $sort },
  projection: projectionOperators,
  query: { ...queryOperators, ...DECIMAL_QUERY_OPERATORS },
  window: windowOperators,
});

/** MongoDB semantics for mingo: strict mode, no user JavaScript. */
const BASE_OPTIONS: Partial<Options> = {
  idKey: '_id',
  useStrictMode: true,
  scriptEnabled: false,
  failOnError: true,
  processingMode: 0,
  context: FULL_CONTEXT,
};

type ComputeOptionsConstructor = new (
  options: Partial<Options>,
  locals?: Document,
) => Partial<Options>;

/**
 * mingo's ComputeOptions is what its classes build from plain options (copying the context);
 * given one already, they reuse its context. It is not exported, hence the path lookup; if a
 * mingo upgrade moves it, plain options still work, only slower.
 */
function loadComputeOptions(): ComputeOptionsConstructor | undefined {
  try {
    const file = path.join(path.dirname(require.resolve('mingo')), 'core', '_internal.js');
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- see above
    const internal = require(file) as { ComputeOptions?: ComputeOptionsConstructor };
    return internal.ComputeOptions;
  } catch {
    return undefined;
  }
}

const ComputeOptions = loadComputeOptions();

function build(options: Partial<Options>): Partial<Options> {
  return ComputeOptions ? new ComputeOptions(options) : options;
}

export const MINGO_OPTIONS: Partial<Options> = build(BASE_OPTIONS);

/** Options for one command: `$$NOW` and `$$CLUSTER_TIME` are fixed for its whole duration. */
export function commandMingoOptions(variables: Document, collation?: Document): Partial<Options> {
  const options: Partial<Options> = { ...BASE_OPTIONS, variables };
  const normalised = normaliseCollation(collation);
  return build(normalised ? { ...options, collation: normalised } : options);
}

/**
 * The plain options behind `options`: mingo's updater spreads its options into a new
 * object, which would lose the context of a ComputeOptions instance.
 */
export function plainOptions(options: Partial<Options>): Partial<Options> {
  const inner = (options as { options?: Partial<Options> }).options;
  return inner ?? options;
}

/** The command's options under a statement's own collation (update / delete statements). */
export function withStatementCollation(
  options: Partial<Options>,
  collation: unknown,
): Partial<Options> {
  const normalised = normaliseCollation(collation);
  return normalised ? withOptions(options, { collation: normalised }) : options;
}

/** `options` plus some more (never spread a ComputeOptions instance: its context is nested). */
export function withOptions(options: Partial<Options>, extra: Partial<Options>): Partial<Options> {
  return build({ ...plainOptions(options), ...extra });
}
