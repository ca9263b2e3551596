import type { Document } from 'bson';
import { evalExpr } from 'mingo/core';
import type { Iterator } from 'mingo/lazy';
import type { Options } from 'mingo/types';
import * as mingoUtil from 'mingo/util';

const { removeValue, setValue, typeOf } = mingoUtil;

/**
 * Copies the objects and arrays a dotted path goes through, so that writing the path changes
 * `output` alone: the stage's later expressions must still read the input as it was (MongoDB
 * evaluates every field of one `$set` against the stage's input document).
 */
export function copyAlongPath(output: Document, path: string): Document {
  const parts = path.split('.');
  let containers: unknown[] = [output];
  for (const part of parts.slice(0, -1)) {
    const next: unknown[] = [];
    for (const container of containers) {
      if (container === null || typeof container !== 'object') continue;
      const holder = container as Record<string, unknown>;
      const value = holder[part];
      if (Array.isArray(value)) {
        const copy = value.map((item: unknown) => (isPlainObject(item) ? { ...item } : item));
        holder[part] = copy;
        next.push(...copy);
      } else if (isPlainObject(value)) {
        const copy = { ...value };
        holder[part] = copy;
        next.push(copy);
      }
    }
    containers = next;
  }
  return output;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeOf(value) === 'object';
}

/**
 * `$addFields` / `$set` as MongoDB runs them: every field's expression reads the stage's
 * input document, even when an earlier field of the same stage wrote a dotted path into it.
 * (mingo's own stage shares nested objects between input and output, so a later expression
 * would see the earlier write.)
 */
export function $addFields(collection: Iterator, expr: Document, options: Options): Iterator {
  const fields = Object.keys(expr);
  if (fields.length === 0) return collection;
  return collection.map((item) => {
    const input = item as Document;
    const output: Document = { ...input };
    for (const field of fields) {
      const value = evalExpr(input, expr[field], options);
      const target = field.includes('.') ? copyAlongPath(output, field) : output;
      if (value !== undefined) setValue(target, field, value);
      else removeValue(target, field);
    }
    return output;
  });
}
