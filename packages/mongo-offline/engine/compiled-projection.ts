import type { Document } from 'bson';
import * as projectionOperators from 'mingo/operators/projection';
import type { Options } from 'mingo/types';
import * as mingoUtil from 'mingo/util';
import { ShapeCache } from './bounded-cache';
import {
  type Bindings,
  type Evaluate,
  ShapeWriter,
  compileExpression,
  hasServerSemantics,
  writeShape,
} from './compiled-expressions';

const { isNumber, isOperator, typeOf } = mingoUtil;

interface CompiledProjection {
  /** No inclusions: start from the whole document and delete `excluded`. */
  startFromDocument: boolean;
  /** Includes `_id` when the projection excludes it. */
  excluded: string[];
  included: string[];
  computedFields: string[];
  computedValues: Evaluate[];
  idExcluded: boolean;
}

/** Compiled find projections by shape (see compiled-expressions.ts), least recently used out. */
export const projectionCache = new ShapeCache<CompiledProjection>(256);

// This module's own structural tokens (see ShapeWriter).
const PROJECTION = -110;
const EXCLUDE = -111;
const INCLUDE = -112;
const COMPUTE = -113;

/**
 * Top-level field names only: no paths, no `$`, nothing mingo's `getValue` treats specially
 * (names of Object.prototype's properties).
 */
const SIMPLE_FIELD = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PROTOTYPE_NAMES = new Set(Object.getOwnPropertyNames(Object.prototype));

type FieldKind = 'exclude' | 'include' | 'compute';

/** How mingo's `$project` treats one top-level value, or undefined when left to mingo. */
function fieldKind(value: unknown): FieldKind | undefined {
  if (value === false || value === 0) return 'exclude';
  if (value === true || isNumber(value)) return 'include';
  if (typeof value === 'string') return 'compute';
  if (typeOf(value) !== 'object') return undefined;
  // `{field: {$op: ...}}`: an expression, unless it is a projection operator ($slice...).
  const keys = Object.keys(value as Document);
  if (keys.length !== 1 || !isOperator(keys[0]) || keys[0] in projectionOperators) {
    return undefined;
  }
  return 'compute';
}

function isSimpleField(name: string): boolean {
  return SIMPLE_FIELD.test(name) && !PROTOTYPE_NAMES.has(name);
}

function compileProjection(projection: Document): CompiledProjection {
  const slots = { next: 0 };
  const compiled: CompiledProjection = {
    startFromDocument: false,
    excluded: [],
    included: [],
    computedFields: [],
    computedValues: [],
    idExcluded: false,
  };
  for (const field of Object.keys(projection)) {
    const value: unknown = projection[field];
    const kind = fieldKind(value);
    if (kind === 'exclude') {
      if (field === '_id') compiled.idExcluded = true;
      else compiled.excluded.push(field);
    } else if (kind === 'include') {
      compiled.included.push(field);
    } else {
      compiled.computedFields.push(field);
      compiled.computedValues.push(compileExpression(value, slots));
    }
  }
  if (compiled.idExcluded) compiled.excluded.push('_id');
  const noInclusions = compiled.included.length + compiled.computedFields.length === 0;
  compiled.startFromDocument = noInclusions && compiled.excluded.length > 0;
  return compiled;
}

/** mingo's `$project` handler (`createHandler`) for top-level fields. */
function apply(compiled: CompiledProjection, document: Document, bindings: Bindings): Document {
  const projected: Document = {};
  if (compiled.startFromDocument) Object.assign(projected, document);
  for (const field of compiled.excluded) delete projected[field];
  for (const field of compiled.included) {
    const value: unknown = document[field];
    if (value !== undefined) projected[field] = value;
  }
  const { computedFields, computedValues } = compiled;
  for (let i = 0; i < computedFields.length; i++) {
    projected[computedFields[i]] = computedValues[i](document, bindings);
  }
  const hasOwn = Object.prototype.hasOwnProperty;
  if (!compiled.idExcluded && !hasOwn.call(projected, '_id') && hasOwn.call(document, '_id')) {
    projected._id = document._id;
  }
  return projected;
}

export interface PreparedProjection {
  /** mingo's projected document (field order is the caller's business, as with mingo). */
  apply(document: Document): Document;
}

/**
 * The projection compiled (or taken from the cache) with this command's parameters, when it
 * names top-level fields only with flags or compilable expressions, and does not mix
 * inclusions and exclusions (mingo's error for that stays mingo's); otherwise undefined.
 */
export function prepareProjection(
  projection: Document,
  options: Partial<Options>,
): PreparedProjection | undefined {
  if (!hasServerSemantics(options)) return undefined;
  const variables: Document = options.variables ?? {};
  const shape = new ShapeWriter(variables);
  shape.mark(PROJECTION);
  let exclusions = 0;
  let inclusions = 0;
  for (const field of Object.keys(projection)) {
    if (!isSimpleField(field)) return undefined;
    const value: unknown = projection[field];
    const kind = fieldKind(value);
    if (!kind) return undefined;
    shape.text(field);
    if (kind === 'exclude') {
      shape.mark(EXCLUDE);
      if (field !== '_id') exclusions += 1;
    } else {
      inclusions += 1;
      if (kind === 'include') {
        shape.mark(INCLUDE);
      } else {
        shape.mark(COMPUTE);
        writeShape(value, shape);
        if (shape.unsupported) return undefined;
      }
    }
  }
  if (exclusions > 0 && inclusions > 0) return undefined;
  const compiled = projectionCache.getOrCreate(shape, () => compileProjection(projection));
  const bindings: Bindings = { params: shape.params, variables, options };
  return { apply: (document) => apply(compiled, document, bindings) };
}
