import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { validateLockKey } from '../keys/lock-key';
import type { Document } from 'mongodb';

/** Most keys one listing returns. */
export const MAX_LIST_LIMIT = 1_000;
/** Keys per listing when the caller names no limit. */
export const DEFAULT_LIST_LIMIT = 100;

/** One page of the lock collection's keys, in key order. */
export interface ListLocksQuery {
  /** Only keys that start with it; `''` for all. */
  prefix: string;
  /** Only keys after this one (the last key of the previous page). */
  after: string | undefined;
  limit: number;
}

/**
 * Checks a listing's options: `prefix` and `after` follow the key rules (a prefix may be empty),
 * `limit` is an integer from 1 to {@link MAX_LIST_LIMIT}.
 *
 * @example
 * listLocksQuery({ prefix: 'orders:', limit: 50 }); // { prefix: 'orders:', after: undefined, limit: 50 }
 */
export function listLocksQuery(
  options: { prefix?: string; after?: string; limit?: number } = {},
): ListLocksQuery {
  const { prefix = '', after, limit = DEFAULT_LIST_LIMIT } = options;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new InvalidLockOptionsError(
      `limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${String(limit)}`,
      { option: 'limit' },
    );
  }
  return {
    prefix: prefix === '' ? '' : validateLockKey(prefix),
    after: after === undefined ? undefined : validateLockKey(after),
    limit,
  };
}

/** Escapes every character that means something in a regular expression (PCRE or JavaScript). */
function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&');
}

/**
 * The filter of a page's keys: `_id` after `after` (exclusive) and starting with `prefix`, an
 * anchored regular expression that MongoDB answers from the `_id` index as a range.
 */
export function keyRangeFilter({ prefix, after }: Omit<ListLocksQuery, 'limit'>): Document {
  const range: { $gt?: string; $regex?: string } = {};
  if (after !== undefined) range.$gt = after;
  if (prefix !== '') range.$regex = `^${escapeRegExp(prefix)}`;
  return Object.keys(range).length === 0 ? {} : { _id: range };
}
