import { type Document, ObjectId, Timestamp } from 'bson';
import { Aggregator } from 'mingo/aggregator';
import { update as mingoUpdate } from 'mingo/updater';
import type { Options } from 'mingo/types';
import { CommandError, badValue } from '../commands/errors';
import { canonicalKey, cloneDocument } from './bson-values';
import { bindFilterVariables, bindSystemVariables } from './system-variables';
import { applyCollationToFilter } from './collation';
import { plainOptions } from './mingo-options';
import { prepareUpdatePipeline } from './compiled-pipeline';
import { resolveDecimalOperators } from './decimal128-update';

const UPDATE_OPERATORS = new Set([
  '$set',
  '$unset',
  '$inc',
  '$mul',
  '$min',
  '$max',
  '$rename',
  '$push',
  '$pull',
  '$pullAll',
  '$addToSet',
  '$pop',
  '$bit',
  '$currentDate',
  '$setOnInsert',
]);

export type UpdateSpec = Document | Document[];

export interface UpdateContext {
  now: Date;
  clusterTime: Timestamp;
  arrayFilters?: Document[];
  /** The query, so that the positional `$` operator can find the matched element. */
  filter: Document;
  mingo: Partial<Options>;
}

export function isPipelineUpdate(update: UpdateSpec): update is Document[] {
  return Array.isArray(update);
}

export function isOperatorUpdate(update: UpdateSpec): boolean {
  if (Array.isArray(update)) return false;
  const keys = Object.keys(update);
  return keys.length > 0 && keys[0].startsWith('$');
}

/** Fails like MongoDB on mixed or unknown operators; a non-operator document is a replacement. */
export function validateUpdate(update: UpdateSpec): void {
  if (Array.isArray(update)) return;
  const keys = Object.keys(update);
  const dollar = keys.filter((key) => key.startsWith('$'));
  if (dollar.length > 0 && dollar.length < keys.length) {
    throw new CommandError(
      52,
      `The dollar ($) prefixed field '${dollar[0]}' in '${dollar[0]}' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.`,
    );
  }
  for (const key of dollar) {
    if (!UPDATE_OPERATORS.has(key)) {
      throw new CommandError(
        9,
        `Unknown modifier: ${key}. Expected a valid update modifier or pipeline-style update specified as an array`,
      );
    }
    const argument: unknown = update[key];
    if (!argument || typeof argument !== 'object' || Array.isArray(argument)) {
      throw new CommandError(
        9,
        `Modifiers operate on fields but we found type ${Array.isArray(argument) ? 'array' : typeof argument} instead. For example: {$mod: {<field>: ...}} not {$set: ...}`,
      );
    }
  }
}

/** `$currentDate` becomes a `$set` of the command's single NOW, and `$setOnInsert` a `$set` on insert only. */
function normaliseOperators(
  update: Document,
  inserting: boolean,
  context: UpdateContext,
): Document {
  const result: Document = {};
  for (const [operator, argument] of Object.entries(update)) {
    if (operator === '$setOnInsert') {
      if (inserting) result.$set = { ...(result.$set ?? {}), ...argument };
    } else if (operator === '$currentDate') {
      const set: Document = { ...(result.$set ?? {}) };
      for (const [path, kind] of Object.entries(argument as Document)) {
        const wantsTimestamp = kind && typeof kind === 'object' && kind.$type === 'timestamp';
        set[path] = wantsTimestamp ? context.clusterTime : context.now;
      }
      result.$set = set;
    } else if (operator === '$set') {
      result.$set = { ...(result.$set ?? {}), ...argument };
    } else {
      result[operator] = argument;
    }
  }
  return result;
}

const UPDATE_PIPELINE_STAGES = new Set([
  '$addFields',
  '$set',
  '$project',
  '$unset',
  '$replaceRoot',
  '$replaceWith',
]);

function assertUpdatePipelineStages(pipeline: Document[]): void {
  for (const stage of pipeline) {
    const name = Object.keys(stage ?? {})[0];
    if (!UPDATE_PIPELINE_STAGES.has(name)) {
      throw new CommandError(72, `${name} is not allowed to be used within an update`);
    }
  }
}

function usesPositionalOperator(modifier: Document): boolean {
  return Object.values(modifier).some(
    (argument) =>
      argument &&
      typeof argument === 'object' &&
      Object.keys(argument as Document).some((path) => /(^|\.)\$(\.|$)/.test(path)),
  );
}

/**
 * mingo re-tests its `condition` before updating; only the positional `$` needs it. Passing
 * the query otherwise would evaluate `$$NOW` a second time (at a later instant) and ignore
 * the collation the match used, so it is given only when needed, bound like the match.
 */
function positionalCondition(modifier: Document, context: UpdateContext): Document {
  if (!usesPositionalOperator(modifier)) return {};
  const bound = bindFilterVariables(context.filter, context.mingo.variables ?? {});
  return applyCollationToFilter(bound, context.mingo.collation);
}

/** Puts `_id` first, as MongoDB stores it. */
export function idFirst(document: Document): Document {
  if (!('_id' in document) || Object.keys(document)[0] === '_id') return document;
  const { _id, ...rest } = document;
  return { _id, ...rest };
}

function assertSameId(before: Document, after: Document): void {
  if (canonicalKey(before._id) !== canonicalKey(after._id)) {
    throw new CommandError(
      66,
      "Performing an update on the path '_id' would modify the immutable field '_id'",
    );
  }
}

/** The document after the update; `original` is never mutated. */
export function applyUpdate(
  original: Document,
  update: UpdateSpec,
  context: UpdateContext,
  inserting = false,
): Document {
  let result: Document;
  if (isPipelineUpdate(update)) {
    assertUpdatePipelineStages(update);
    try {
      // `$set` / `$addFields` pipelines of compilable expressions run compiled, cached by
      // shape (compiled-pipeline.ts). Other stages are aggregation stages: an Aggregator built
      // from the command's options runs them without mingo's per-call operator-table copy.
      const compiled = prepareUpdatePipeline(update, context.mingo);
      if (compiled) {
        result = compiled.run(cloneDocument(original));
      } else {
        const pipeline = bindSystemVariables(update, context.mingo.variables ?? {});
        result = new Aggregator(pipeline, context.mingo).run<Document>([
          cloneDocument(original),
        ])[0];
      }
    } catch (error) {
      throw asCommandError(error);
    }
    if (!('_id' in result) && '_id' in original) result = { _id: original._id, ...result };
  } else if (isOperatorUpdate(update)) {
    result = cloneDocument(original);
    // Decimal128 `$inc` / `$mul` / `$min` / `$max` become `$set`s of MongoDB's results.
    const modifier = resolveDecimalOperators(
      result,
      normaliseOperators(update, inserting, context),
    );
    if (Object.keys(modifier).length > 0) {
      try {
        mingoUpdate(
          result,
          modifier,
          context.arrayFilters,
          positionalCondition(modifier, context),
          {
            queryOptions: plainOptions(context.mingo),
          },
        );
      } catch (error) {
        throw asCommandError(error);
      }
    }
  } else {
    if ('_id' in update && '_id' in original) assertSameId(original, update);
    result = cloneDocument({ _id: original._id, ...update });
    if (result._id === undefined) delete result._id;
  }
  if ('_id' in original) assertSameId(original, result);
  return idFirst(result);
}

/** The document an upsert starts from: the filter's equality conditions. */
export function upsertSeed(filter: Document): Document {
  const seed: Document = {};
  collectEqualities(filter, seed);
  return seed;
}

function collectEqualities(filter: Document, seed: Document): void {
  for (const [key, value] of Object.entries(filter)) {
    if (key === '$and' && Array.isArray(value)) {
      for (const clause of value) collectEqualities(clause as Document, seed);
      continue;
    }
    if (key.startsWith('$')) continue;
    if (isOperatorObject(value)) {
      if ('$eq' in value) setPath(seed, key, value.$eq);
      continue;
    }
    setPath(seed, key, value);
  }
}

function isOperatorObject(value: unknown): value is Document {
  if (!value || typeof value !== 'object' || Array.isArray(value) || '_bsontype' in value)
    return false;
  if (value instanceof Date || value instanceof RegExp) return false;
  const keys = Object.keys(value);
  return keys.length > 0 && keys[0].startsWith('$');
}

function setPath(document: Document, path: string, value: unknown): void {
  if (value instanceof RegExp) return;
  const parts = path.split('.');
  let current = document;
  for (const part of parts.slice(0, -1)) {
    if (!current[part] || typeof current[part] !== 'object') current[part] = {};
    current = current[part] as Document;
  }
  current[parts[parts.length - 1]] = value;
}

/** The inserted document of an upsert, `_id` first (taken from the filter or generated). */
export function buildUpsertDocument(
  filter: Document,
  update: UpdateSpec,
  context: UpdateContext,
): Document {
  if (!isPipelineUpdate(update) && !isOperatorUpdate(update)) {
    const seedId = upsertSeed(filter)._id;
    const document = cloneDocument(update);
    // `_id: null` is a value (MongoDB stores it); only a missing _id is generated.
    const _id = '_id' in document ? document._id : seedId !== undefined ? seedId : new ObjectId();
    return idFirst({ ...document, _id });
  }
  const seed = upsertSeed(filter);
  const updated = applyUpdate(seed, update, context, true);
  if (!('_id' in updated)) return { _id: new ObjectId(), ...updated };
  return idFirst(updated);
}

function asCommandError(error: unknown): CommandError {
  if (error instanceof CommandError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (/non-numeric/i.test(message)) return new CommandError(14, message);
  return badValue(message);
}
