import { httpError } from './document-http-errors';

/** Metadata key of `@IfMatch()` on a handler: `{ required }`. */
export const IF_MATCH_METADATA = 'MONGO_LOCK:IF_MATCH';

/** Metadata key of `@VersionETag()` on a handler: the version field's path. */
export const VERSION_ETAG_METADATA = 'MONGO_LOCK:VERSION_ETAG';

/** Where `@IfMatch()` leaves the version it read on the request, for the 412 mapping. */
const IF_MATCH_VERSION = Symbol('MONGO_LOCK:IF_MATCH_VERSION');

/** Options of `@IfMatch()`. */
export interface IfMatchOptions {
  /** Refuse a request without `If-Match` with 428 Precondition Required. Default true. */
  required?: boolean;
}

export type IfMatchMetadata = Required<IfMatchOptions>;

export type RequestLike = { headers?: Record<string, string | string[] | undefined> } & {
  [IF_MATCH_VERSION]?: string;
};

// A strong entity tag (RFC 9110 §8.8.3): quoted characters of etagc (no `"`, no spaces).
const STRONG_ETAG = /^"([\x21\x23-\x7e]+)"$/;

/**
 * The version in the request's `If-Match`, recorded on the request for the 412 mapping. Absent:
 * `undefined`, or 428 if required; weak (`W/"17"`), listed, `*` or unquoted: 400.
 */
export function readIfMatch(request: RequestLike, required: boolean): string | undefined {
  const header = request.headers?.['if-match'];
  if (header === undefined) {
    if (!required) return undefined;
    throw httpError(428, 'This request must carry If-Match with the ETag of the version it read');
  }
  const value = (Array.isArray(header) ? header.join(',') : header).trim();
  const match = STRONG_ETAG.exec(value);
  if (!match) {
    throw httpError(
      400,
      `If-Match must be one strong ETag such as "17", got ${JSON.stringify(value.slice(0, 64))}`,
    );
  }
  request[IF_MATCH_VERSION] = match[1];
  return match[1];
}

/** The version that `@IfMatch()` read from this request, if any. */
export function ifMatchVersionOf(request: RequestLike): string | undefined {
  return request[IF_MATCH_VERSION];
}
