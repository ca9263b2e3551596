import { BSON, Double, Int32, Long } from 'mongodb';
import type { Document, Filter } from 'mongodb';
import { isDuplicateKeyError } from '../mongo-error-codes';

/**
 * A document's `_id` as the lock key the waiting layer and handles use: canonical Extended
 * JSON, so ids of different types never share a key (`"1"` is the string, `{"$numberInt":"1"}`
 * the number).
 */
export function keyOfDocumentId(id: unknown): string {
  // The server matches 1, Long(1) and 1.0 alike: so must the key.
  if (id instanceof Long || id instanceof Int32 || id instanceof Double) {
    const value = id instanceof Long ? id.toNumber() : id.valueOf();
    if (Number.isSafeInteger(value) || !Number.isInteger(value)) id = value;
  }
  return BSON.EJSON.stringify(id as Parameters<typeof BSON.EJSON.stringify>[0], { relaxed: false });
}

/** The `_id` a key stands for: the inverse of {@link keyOfDocumentId}. */
export function documentIdOfKey(key: string): unknown {
  return BSON.EJSON.parse(key, { relaxed: false });
}

/** The filter that selects the document a key stands for. */
export function byKey(key: string): Filter<Document> {
  return { _id: documentIdOfKey(key) } as Filter<Document>;
}

/** A duplicate key on `_id` (not on another unique index of the application's). */
export function isDuplicateIdError(error: unknown): boolean {
  if (!isDuplicateKeyError(error)) return false;
  const { keyPattern, message } = error as { keyPattern?: Document; message?: string };
  if (keyPattern) return Object.keys(keyPattern).length === 1 && '_id' in keyPattern;
  return /index: _id_ /.test(message ?? '');
}
