import { InvalidLockKeyError } from '../errors/invalid-lock-key.error';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { validateLockKey } from '../keys/lock-key';
import type { Document } from 'mongodb';

/** Most keys one listing returns. */
const MAX_LIST_LIMIT = 1_000;
/** Keys per listing when the caller names no limit. */
const DEFAULT_LIST_LIMIT = 100;

/** One page of the lock collection's keys, in key order. */
export interface ListLocksQuery {
  /** Only keys that start with it; `''` for all. */
  prefix: string;
  /** Only keys after this one (exclusive: the previous page's last). */
  after: string | undefined;
  limit: number;
}

/**
 * Checks a listing's options: `prefix` (may be empty) and `after` follow the key rules (else
 * `InvalidLockKeyError`), `limit` is an integer from 1 to {@link MAX_LIST_LIMIT} (else
 * `InvalidLockOptionsError`).
 *
 * @example
 * listLocksQuery({ prefix: 'orders:', limit: 50 });
 * // => { prefix: 'orders:', after: undefined, limit: 50 }
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
    prefix: prefix === '' ? '' : listedKey('prefix', prefix),
    after: after === undefined ? undefined : listedKey('after', after),
    limit,
  };
}

/** A key rule broken by `prefix` or `after`: the message names the option. */
function listedKey(option: string, value: unknown): string {
  try {
    return validateLockKey(value);
  } catch (error) {
    throw new InvalidLockKeyError(`list() option ${option}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/**
 * A string `_id` (a document someone else wrote with another is no key) after `after` and
 * starting with `prefix`: an anchored regex, an `_id` index range.
 */
export function keyRangeFilter({ prefix, after }: Omit<ListLocksQuery, 'limit'>): Document {
  const range: { $type: 'string'; $gt?: string; $regex?: string } = { $type: 'string' };
  if (after !== undefined) range.$gt = after;
  // Every character special in a PCRE or JavaScript regular expression escaped.
  if (prefix !== '') range.$regex = `^${prefix.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')}`;
  return { _id: range };
}
