import type { Document } from 'bson';
import type { Options } from 'mingo/types';
import * as mingoUtil from 'mingo/util';
import { copyAlongPath } from './add-fields-stage';
import { ShapeCache } from './bounded-cache';
import {
  type Bindings,
  type Evaluate,
  ShapeWriter,
  compileExpression,
  hasServerSemantics,
  writeShape,
} from './compiled-expressions';

const { removeValue, setValue, typeOf } = mingoUtil;

interface CompiledStage {
  fields: string[];
  /** No dot and no `__proto__`: mingo's setValue / removeValue come down to `[field]`. */
  simple: boolean[];
  values: Evaluate[];
}

function isSimpleField(field: string): boolean {
  return !field.includes('.') && !field.includes('__proto__');
}

/** Compiled update pipelines by shape (see compiled-expressions.ts), least recently used out. */
export const updatePipelineCache = new ShapeCache<CompiledStage[]>(256);

// This module's own structural tokens (see ShapeWriter).
const PIPELINE = -100;
const STAGE = -101;
const STAGE_END = -102;
const UNSET = -103;

/** mingo's `$set` is its `$addFields`. */
const ADD_FIELDS_STAGES = new Set(['$set', '$addFields']);

export interface PreparedPipeline {
  /** The document after the pipeline; `document` is the caller's copy (mingo's $addFields shares nested values). */
  run(document: Document): Document;
}

/** A `$set` / `$addFields` stage's fields, or a `$unset` stage's paths; undefined for others. */
type StageSpec = { set: Document } | { unset: string[] };

function stageSpec(stage: unknown): StageSpec | undefined {
  if (typeOf(stage) !== 'object') return undefined;
  const names = Object.keys(stage as Document);
  if (names.length !== 1) return undefined;
  const spec: unknown = (stage as Document)[names[0]];
  if (names[0] === '$unset') {
    const paths: unknown[] = Array.isArray(spec) ? spec : [spec];
    // Top-level names only: a dotted path may run through arrays, which mingo's stage handles.
    const simple = paths.every(
      (path) => typeof path === 'string' && path !== '' && isSimpleField(path),
    );
    return simple && paths.length > 0 ? { unset: paths as string[] } : undefined;
  }
  if (!ADD_FIELDS_STAGES.has(names[0])) return undefined;
  return typeOf(spec) === 'object' ? { set: spec as Document } : undefined;
}

/** `$unset` removes its paths: an `$addFields` whose every value is missing. */
const MISSING: Evaluate = () => undefined;

function compileStages(pipeline: Document[]): CompiledStage[] {
  const slots = { next: 0 };
  return pipeline.map((stage) => {
    const spec = stageSpec(stage)!;
    const fields = 'unset' in spec ? spec.unset : Object.keys(spec.set);
    return {
      fields,
      simple: fields.map(isSimpleField),
      values: fields.map((field) =>
        'unset' in spec ? MISSING : compileExpression(spec.set[field], slots),
      ),
    };
  });
}

/** mingo's `$addFields`: every value is computed from the stage's input document. */
function addFields(stage: CompiledStage, input: Document, bindings: Bindings): Document {
  const { fields, simple, values } = stage;
  if (fields.length === 0) return input;
  const output: Document = { ...input };
  for (let i = 0; i < fields.length; i++) {
    const value = values[i](input, bindings);
    if (simple[i]) {
      // What mingo's walk does for a top-level name on a plain object.
      if (value !== undefined) output[fields[i]] = value;
      else delete output[fields[i]];
    } else if (value !== undefined) {
      setValue(copyAlongPath(output, fields[i]), fields[i], value);
    } else {
      removeValue(copyAlongPath(output, fields[i]), fields[i]);
    }
  }
  return output;
}

/**
 * The update pipeline compiled (or taken from the cache) with this command's parameters, when
 * every stage is a `$set` / `$addFields` whose expressions can be compiled, or a `$unset`; otherwise
 * undefined, and the caller runs mingo's Aggregator as before.
 */
export function prepareUpdatePipeline(
  pipeline: Document[],
  options: Partial<Options>,
): PreparedPipeline | undefined {
  if (!hasServerSemantics(options)) return undefined;
  const variables: Document = options.variables ?? {};
  const shape = new ShapeWriter(variables);
  shape.mark(PIPELINE);
  for (const stage of pipeline) {
    const spec = stageSpec(stage);
    if (!spec) return undefined;
    shape.mark(STAGE);
    if ('unset' in spec) {
      shape.mark(UNSET);
      for (const path of spec.unset) shape.text(path);
    } else {
      for (const field of Object.keys(spec.set)) {
        shape.text(field);
        writeShape(spec.set[field], shape);
        if (shape.unsupported) return undefined;
      }
    }
    shape.mark(STAGE_END);
  }
  const stages = updatePipelineCache.getOrCreate(shape, () => compileStages(pipeline));
  const bindings: Bindings = { params: shape.params, variables, options };
  return {
    run: (document) => {
      let current = document;
      for (const stage of stages) current = addFields(stage, current, bindings);
      return current;
    },
  };
}
