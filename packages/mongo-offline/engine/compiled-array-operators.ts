import type { Document } from 'bson';
import * as mingoUtil from 'mingo/util';
import {
  type Bindings,
  type NativeOperator,
  type Scope,
  OBJECT_FORM,
  arrayOf,
  evaluateAll,
  isNil,
  single,
  truthy,
} from './compiled-operator-support';

/**
 * Array, object and variable operators compiled like the scalar ones (compiled-expressions.ts):
 * each a mirror of mingo's own code, values it does not handle (and every error) left to mingo
 * through `viaMingo`. The lock's pipelines keep the line of waiting processes and the holders
 * in objects they walk with these on every command.
 *
 * `$let`, `$filter`, `$map` and `$reduce` bind variables: the names are part of the shape, the
 * values live in `Bindings.locals` while the operator runs, and a subtree left to mingo inside
 * one is given them through a `$let` (compiled-expressions.ts, `withLocals`).
 */

const { has, isEqual, isObject, typeOf } = mingoUtil;

/** mingo's own variables, which a binding of the same name would not reach. */
const RESERVED = new Set([
  'ROOT',
  'CURRENT',
  'REMOVE',
  'NOW',
  'CLUSTER_TIME',
  'KEEP',
  'PRUNE',
  'DESCEND',
  '__proto__',
]);

/** A name a compiled operator may bind; undefined leaves the operator to mingo. */
function bindable(name: unknown): string | undefined {
  return typeof name === 'string' && /^[A-Za-z_]\w*$/.test(name) && !RESERVED.has(name)
    ? name
    : undefined;
}

/** The argument is an object with exactly these fields, the `required` ones present. */
function objectWith(
  argument: unknown,
  allowed: string[],
  required: string[],
): Document | undefined {
  if (typeOf(argument) !== 'object') return undefined;
  const spec = argument as Document;
  for (const key of Object.keys(spec)) if (!allowed.includes(key)) return undefined;
  return required.every((key) => has(spec, key)) ? spec : undefined;
}

const ABSENT = Symbol('absent');

/** Binds `name` (to be set by the caller); returns what to give back to `unbind`. */
function bind(bindings: Bindings, name: string): unknown {
  const locals = (bindings.locals ??= new Map());
  return locals.has(name) ? locals.get(name) : ABSENT;
}

function unbind(bindings: Bindings, name: string, previous: unknown): void {
  if (previous === ABSENT) bindings.locals!.delete(name);
  else bindings.locals!.set(name, previous);
}

/** `$filter` and `$map`: `{input, as, <per item>}`, `as` defaulting to `this`. */
function iterating(
  perItem: 'cond' | 'in',
  run: (values: unknown[], each: () => unknown) => unknown[],
): NativeOperator {
  return {
    split: (argument) => {
      const spec = objectWith(argument, ['input', 'as', perItem], ['input', perItem]);
      if (!spec) return undefined;
      // mingo: `as || 'this'` ($filter); `$map` rejects a non-string `as`, left to mingo.
      const name = isNil(spec.as) || spec.as === '' ? 'this' : bindable(spec.as);
      if (!name) return undefined;
      return { form: OBJECT_FORM, items: [spec.input, spec[perItem]], binds: [[], [name]] };
    },
    build: ([input, item], viaMingo, split) => {
      const name = split.binds![1][0];
      return (document, bindings) => {
        const values = input(document, bindings);
        if (isNil(values)) return null;
        if (!Array.isArray(values)) return viaMingo(document, bindings);
        if (values.length === 0) return [];
        const previous = bind(bindings, name);
        const locals = bindings.locals!;
        let index = 0;
        try {
          return run(values, () => {
            locals.set(name, values[index++]);
            return item(document, bindings);
          });
        } finally {
          unbind(bindings, name, previous);
        }
      };
    },
  };
}

/**
 * A one-argument operator that gives null for a null or missing value; `otherwise` leaves the
 * whole operator to mingo.
 */
function ofValue(compute: (value: unknown, otherwise: () => unknown) => unknown): NativeOperator {
  return {
    split: single,
    build:
      ([item], viaMingo) =>
      (document, bindings) => {
        const value = item(document, bindings);
        return isNil(value) ? null : compute(value, () => viaMingo(document, bindings));
      },
  };
}

export const ARRAY_OPERATORS: Record<string, NativeOperator> = {
  $filter: iterating('cond', (values, each) => {
    const kept: unknown[] = [];
    for (const value of values) if (truthy(each())) kept.push(value);
    return kept;
  }),
  $map: iterating('in', (values, each) => {
    const mapped = new Array<unknown>(values.length);
    for (let i = 0; i < values.length; i++) mapped[i] = each();
    return mapped;
  }),
  $reduce: {
    split: (argument, scope: Scope) => {
      const fields = ['input', 'initialValue', 'in'];
      const spec = objectWith(argument, fields, fields);
      if (!spec) return undefined;
      // mingo's `$$this` is the element unless a variable of that name is already bound.
      const binds = scope.includes('this') ? ['value'] : ['value', 'this'];
      return {
        form: OBJECT_FORM,
        items: [spec.input, spec.initialValue, spec.in],
        binds: [[], [], binds],
      };
    },
    build: ([input, initialValue, each], viaMingo, split) => {
      const bindsThis = split.binds![2].includes('this');
      return (document, bindings) => {
        const values = input(document, bindings);
        let result = initialValue(document, bindings);
        if (isNil(values)) return null;
        // mingo evaluates `in` on each element, where an accumulator (`$max`...) meeting an
        // array element accumulates over it instead of its arguments: left to mingo.
        if (!Array.isArray(values) || values.some(Array.isArray)) {
          return viaMingo(document, bindings);
        }
        const previousValue = bind(bindings, 'value');
        const previousThis = bindsThis ? bind(bindings, 'this') : ABSENT;
        const locals = bindings.locals!;
        try {
          for (const value of values) {
            locals.set('value', result);
            if (bindsThis) locals.set('this', value);
            result = each(document, bindings);
          }
        } finally {
          if (bindsThis) unbind(bindings, 'this', previousThis);
          unbind(bindings, 'value', previousValue);
        }
        return result;
      };
    },
  },
  $let: {
    split: (argument) => {
      const spec = objectWith(argument, ['vars', 'in'], ['vars', 'in']);
      if (!spec || typeOf(spec.vars) !== 'object') return undefined;
      const names = Object.keys(spec.vars as Document);
      if (!names.every((name) => bindable(name))) return undefined;
      return {
        form: names.length,
        items: [...names.map((name) => (spec.vars as Document)[name]), spec.in],
        binds: [...names.map(() => []), names],
      };
    },
    build: (items, _viaMingo, split) => {
      const names = split.binds![items.length - 1];
      const body = items[items.length - 1];
      return (document, bindings) => {
        // Every value from outside the `$let`, then the body with them bound.
        const values = new Array<unknown>(names.length);
        for (let i = 0; i < names.length; i++) values[i] = items[i](document, bindings);
        const previous = names.map((name) => bind(bindings, name));
        const locals = bindings.locals!;
        try {
          for (let i = 0; i < names.length; i++) locals.set(names[i], values[i]);
          return body(document, bindings);
        } finally {
          for (let i = names.length - 1; i >= 0; i--) unbind(bindings, names[i], previous[i]);
        }
      };
    },
  },
  $size: ofValue((value, otherwise) => (Array.isArray(value) ? value.length : otherwise())),
  $in: {
    split: arrayOf(2),
    build:
      ([item, array], viaMingo) =>
      (document, bindings) => {
        const wanted = item(document, bindings);
        const values = array(document, bindings);
        if (!Array.isArray(values)) return viaMingo(document, bindings);
        for (const value of values) if (isEqual(value, wanted)) return true;
        return false;
      },
  },
  $concatArrays: {
    split: arrayOf(),
    build: (items, viaMingo) => (document, bindings) => {
      const arrays = evaluateAll(items, document, bindings);
      for (const array of arrays) {
        if (isNil(array)) return null;
        if (!Array.isArray(array)) return viaMingo(document, bindings);
      }
      return ([] as unknown[]).concat(...(arrays as unknown[][]));
    },
  },
  $slice: {
    split: (argument) =>
      Array.isArray(argument) && (argument.length === 2 || argument.length === 3)
        ? arrayOf()(argument)
        : undefined,
    build: (items, viaMingo) => (document, bindings) => {
      const [array, skipArgument, limitArgument] = evaluateAll(items, document, bindings);
      if (!Array.isArray(array) || !Number.isInteger(skipArgument)) {
        return viaMingo(document, bindings);
      }
      let skip = skipArgument as number;
      let limit = limitArgument as number | null | undefined;
      if (isNil(limit)) {
        if (skip < 0) {
          skip = Math.max(0, array.length + skip);
        } else {
          limit = skip;
          skip = 0;
        }
      } else {
        if (!Number.isInteger(limit) || limit < 1) return viaMingo(document, bindings);
        if (skip < 0) skip = Math.max(0, array.length + skip);
        limit += skip;
      }
      // As mingo: a null third argument (not an absent one) makes the slice empty.
      return array.slice(skip, limit as number);
    },
  },
  $arrayElemAt: {
    split: arrayOf(2),
    build: (items, viaMingo) => (document, bindings) => {
      const [array, index] = evaluateAll(items, document, bindings);
      if (isNil(array) || isNil(index)) return null;
      if (!Array.isArray(array) || !Number.isInteger(index)) return viaMingo(document, bindings);
      const at = index as number;
      if (at < 0 && Math.abs(at) <= array.length) return array[(at + array.length) % array.length];
      if (at >= 0 && at < array.length) return array[at];
      return undefined;
    },
  },
  $objectToArray: ofValue((value, otherwise) => {
    if (!isObject(value)) return otherwise();
    const keys = Object.keys(value);
    const pairs = new Array<Document>(keys.length);
    for (let i = 0; i < keys.length; i++) pairs[i] = { k: keys[i], v: value[keys[i]] };
    return pairs;
  }),
  // `{k, v}` pairs only; `[k, v]` pairs (which mingo flattens) are left to it.
  $arrayToObject: ofValue((pairs, otherwise) => {
    if (!Array.isArray(pairs)) return otherwise();
    const result: Document = {};
    for (const pair of pairs) {
      if (!isObject(pair) || !has(pair, 'k', 'v')) return otherwise();
      const { k, v } = pair;
      result[k as string] = v;
    }
    return result;
  }),
  $mergeObjects: {
    split: arrayOf(),
    build: (items) => (document, bindings) => {
      const merged: Document = {};
      for (const object of evaluateAll(items, document, bindings)) {
        if (isNil(object)) continue;
        for (const key of Object.keys(object)) {
          const value = (object as Document)[key];
          if (value !== undefined) merged[key] = value;
        }
      }
      return merged;
    },
  },
  $concat: {
    split: arrayOf(),
    build: (items, viaMingo) => (document, bindings) => {
      const parts = evaluateAll(items, document, bindings);
      let strings = true;
      for (const part of parts) {
        if (isNil(part)) return null;
        strings &&= typeof part === 'string';
      }
      return strings ? parts.join('') : viaMingo(document, bindings);
    },
  },
};
