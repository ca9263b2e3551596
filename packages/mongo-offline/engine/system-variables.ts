import type { Document } from 'bson';

/**
 * mingo evaluates `$$NOW` lazily per evaluation, so two documents of one updateMany could get
 * different times. MongoDB fixes NOW (and CLUSTER_TIME) once per command: the variables are
 * substituted as literals before mingo sees the expression.
 */
export function bindSystemVariables<T>(expression: T, variables: Document): T {
  return substitute(expression, variables) as T;
}

function isPlainContainer(value: unknown): value is Document | unknown[] {
  if (Array.isArray(value)) return true;
  if (!value || typeof value !== 'object') return false;
  if (value instanceof Date || value instanceof RegExp || '_bsontype' in value) return false;
  return true;
}

function substitute(value: unknown, variables: Document): unknown {
  if (typeof value === 'string' && value.startsWith('$$')) {
    const name = value.slice(2);
    if (name === 'NOW' || name === 'CLUSTER_TIME') return { $literal: variables[name] };
    return value;
  }
  if (!isPlainContainer(value)) return value;
  if (Array.isArray(value)) return value.map((item) => substitute(item, variables));
  const result: Document = {};
  for (const [key, item] of Object.entries(value)) {
    result[key] = key === '$literal' ? item : substitute(item, variables);
  }
  return result;
}

/** In a query filter only `$expr` holds expressions; elsewhere '$$NOW' is a plain string. */
export function bindFilterVariables(filter: Document, variables: Document): Document {
  if (!isPlainContainer(filter) || Array.isArray(filter)) return filter;
  const result: Document = {};
  for (const [key, value] of Object.entries(filter)) {
    if (key === '$expr') result[key] = substitute(value, variables);
    else if ((key === '$and' || key === '$or' || key === '$nor') && Array.isArray(value)) {
      result[key] = value.map((clause) => bindFilterVariables(clause as Document, variables));
    } else result[key] = value;
  }
  return result;
}
