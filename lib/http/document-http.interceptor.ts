import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
  Optional,
} from '@nestjs/common';
import { HttpAdapterHost, Reflector } from '@nestjs/core';
import { catchError, defer, type Observable, tap, throwError } from 'rxjs';
import { readPath } from '../keys/key-template';
import { versionTag } from '../store/documents/document-version';
import { documentHttpError } from './document-http-errors';
import { noteRefusalRetryAfter, restoreRetryAfter, setHeaderIfUnsent } from './response-headers';
import {
  IF_MATCH_METADATA,
  type IfMatchMetadata,
  ifMatchVersionOf,
  readIfMatch,
  type RequestLike,
  VERSION_ETAG_METADATA,
} from './if-match';

/**
 * The HTTP side of document locks and versions, applied by `@LockedDocument`, `@IfMatch()` and
 * `@VersionETag()` (never registered by hand): checks `If-Match` before the handler runs, sets
 * `ETag` once it completed, and maps document errors, the handler's included, to the answers of
 * docs/document-locks.md ("Over HTTP"). Other transports: unchanged.
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
    const request = context.switchToHttp().getRequest<RequestLike>();
    const setHeader = (name: string, value: string) =>
      setHeaderIfUnsent(this.adapterHost, context, name, value);
    // ETag only on completion: a locked transaction may still fail to commit after its value,
    // and that answer must not name a version it never wrote. `defer`: each subscription's own.
    return defer(() => {
      // An outer retry() runs us again: the attempt before's `Retry-After` is not this one's.
      restoreRetryAfter(this.adapterHost, context);
      // 428 or 400 before the handler runs or any lock is taken (not a document error: unmapped).
      if (ifMatch) readIfMatch(request, ifMatch.required);
      let last: { result: unknown } | undefined;
      return next.handle().pipe(
        tap({
          next: (result: unknown) => (last = { result }),
          complete: () => {
            if (etagField === undefined || !last) return;
            const tag = versionTag(readPath(last.result, etagField.split('.')));
            if (tag !== undefined) setHeader('ETag', `"${tag}"`);
          },
        }),
      );
    }).pipe(
      catchError((error: unknown) => {
        const mapped = documentHttpError(error, ifMatchVersionOf(request));
        if (!mapped) return throwError(() => error);
        if (mapped.retryAfterSeconds !== undefined) {
          noteRefusalRetryAfter(context);
          setHeader('Retry-After', String(mapped.retryAfterSeconds));
        }
        return throwError(() => mapped.exception);
      }),
    );
  }
}
