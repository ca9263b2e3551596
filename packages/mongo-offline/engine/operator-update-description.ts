import type { Document } from 'bson';
import { getPath } from './bson-values';
import {
  type UpdateDescription,
  diffArrays,
  diffObjects,
  isPlainObject,
  same,
} from './update-description';

/** Operators whose effect MongoDB logs as "this path now holds this value". */
const WHOLE_VALUE_OPERATORS = new Set([
  '$set',
  '$setOnInsert',
  '$inc',
  '$mul',
  '$min',
  '$max',
  '$currentDate',
  '$bit',
  '$unset',
]);

function isPositional(segment: string): boolean {
  return segment === '$' || segment.startsWith('$[');
}

/** The path up to (not including) its first positional segment, and whether it had one. */
function concretePrefix(path: string): { prefix: string; positional: boolean } {
  const segments = path.split('.');
  const cut = segments.findIndex(isPositional);
  if (cut < 0) return { prefix: path, positional: false };
  return { prefix: segments.slice(0, cut).join('.'), positional: true };
}

function has(document: Document, path: string): boolean {
  let current: unknown = document;
  for (const part of path.split('.')) {
    if (!current || typeof current !== 'object' || !(part in (current as Document))) return false;
    current = (current as Document)[part];
  }
  return true;
}

/** Structural diff of one subtree, reported under its path. */
function diffSubtree(
  before: Document,
  after: Document,
  path: string,
  out: UpdateDescription,
): void {
  if (!has(after, path)) {
    if (has(before, path)) out.removedFields.push(path);
    return;
  }
  const old = getPath(before, path);
  const value = getPath(after, path);
  if (has(before, path) && same(old, value)) return;
  if (Array.isArray(old) && Array.isArray(value)) diffArrays(old, value, path, out);
  else if (isPlainObject(old) && isPlainObject(value)) diffObjects(old, value, `${path}.`, out);
  else out.updatedFields[path] = value;
}

/**
 * The change-stream delta of an operator update at MongoDB's granularity: a path set by
 * `$set` / `$inc` / ... is reported whole (`$set: {sub: {...}}` gives `sub`, not its
 * subfields), `$unset` as removed, array operators and positional paths as element changes.
 */
export function describeOperatorUpdate(
  before: Document,
  after: Document,
  modifier: Document,
): UpdateDescription {
  const out: UpdateDescription = { updatedFields: {}, removedFields: [], truncatedArrays: [] };
  const seen = new Set<string>();
  const touch = (path: string, whole: boolean): void => {
    if (seen.has(path)) return;
    seen.add(path);
    if (!whole) return diffSubtree(before, after, path, out);
    if (!has(after, path)) {
      if (has(before, path)) out.removedFields.push(path);
    } else if (!has(before, path) || !same(getPath(before, path), getPath(after, path))) {
      out.updatedFields[path] = getPath(after, path);
    }
  };
  for (const [operator, argument] of Object.entries(modifier)) {
    if (!argument || typeof argument !== 'object') continue;
    for (const [path, value] of Object.entries(argument as Document)) {
      const { prefix, positional } = concretePrefix(path);
      if (!prefix) continue;
      if (operator === '$rename') {
        touch(prefix, true);
        if (typeof value === 'string') touch(value, true);
      } else {
        touch(prefix, WHOLE_VALUE_OPERATORS.has(operator) && !positional);
      }
    }
  }
  return out;
}
