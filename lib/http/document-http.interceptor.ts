import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
  Optional,
} from '@nestjs/common';
import { HttpAdapterHost, Reflector } from '@nestjs/core';
import { catchError, defer, type Observable, tap, throwError } from 'rxjs';
import { versionTag } from '../store/documents/document-version';
import { documentHttpError } from './document-http-errors';
import { setHeaderIfUnsent } from './response-headers';
import {
  IF_MATCH_METADATA,
  type IfMatchMetadata,
  ifMatchVersionOf,
  readIfMatch,
  VERSION_ETAG_METADATA,
} from './if-match';

function readPath(value: unknown, path: string): unknown {
  let current = value;
  for (const segment of path.split('.')) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

/**
 * The HTTP side of document locks and versions, on routes with `@LockedDocument`, `@IfMatch()`
 * or `@VersionETag()` (they apply it; you never register it yourself):
 * - a required `If-Match` that is missing is `428`, malformed `400`, before the handler runs;
 * - errors of document locks and versions, the handler's included, become HTTP errors:
 *   `DocumentLockedError` 423 with `Retry-After`, `DocumentNotFoundError` 404,
 *   `VersionConflictError` 409 (412 when its expected version came from `If-Match`),
 *   `InvalidLockKeyError`/`InvalidLockOptionsError` 400, `LockStoreUnavailableError` 503 with
 *   `Retry-After: 1`; bodies are `{ statusCode, message, error }`;
 * - with `@VersionETag(field)`, the returned document's version is the response's `ETag`, once
 *   the handler has completed (not on a response that then fails).
 * Other transports: unchanged.
 */
@Injectable()
export class DocumentHttpInterceptor implements NestInterceptor {
  constructor(
    private readonly reflector: Reflector,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    const handler = context.getHandler();
    const ifMatch = this.reflector.get<IfMatchMetadata | undefined>(IF_MATCH_METADATA, handler);
    const etagField = this.reflector.get<string | undefined>(VERSION_ETAG_METADATA, handler);
    const request = context.switchToHttp().getRequest<object>();
    if (ifMatch) {
      try {
        readIfMatch(request, ifMatch.required);
      } catch (error) {
        return throwError(() => error);
      }
    }
    // The ETag is set when the handler has completed: a locked transaction may still fail to
    // commit after its value, and that answer must not carry the version it never wrote. The
    // last value is each subscription's own (`defer`), so a resubscription starts afresh.
    return defer(() => {
      let last: { result: unknown } | undefined;
      return next.handle().pipe(
        tap({
          next: (result: unknown) => (last = { result }),
          complete: () => {
            if (etagField !== undefined && last) this.setETag(context, last.result, etagField);
          },
        }),
      );
    }).pipe(
      catchError((error: unknown) => {
        const mapped = documentHttpError(error, ifMatchVersionOf(request));
        if (!mapped) return throwError(() => error);
        if (mapped.retryAfterSeconds !== undefined) {
          this.setHeader(context, 'Retry-After', String(mapped.retryAfterSeconds));
        }
        return throwError(() => mapped.exception);
      }),
    );
  }

  private setETag(context: ExecutionContext, result: unknown, field: string): void {
    const tag = versionTag(readPath(result, field));
    if (tag !== undefined) this.setHeader(context, 'ETag', `"${tag}"`);
  }

  private setHeader(context: ExecutionContext, name: string, value: string): void {
    setHeaderIfUnsent(this.adapterHost, context, name, value);
  }
}
