import { createParamDecorator, type ExecutionContext, SetMetadata } from '@nestjs/common';
import { useInterceptorOnce } from '../decorators/locked.decorator';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { DocumentHttpInterceptor } from './document-http.interceptor';
import {
  IF_MATCH_METADATA,
  type IfMatchMetadata,
  type IfMatchOptions,
  readIfMatch,
  type RequestLike,
  VERSION_ETAG_METADATA,
} from './if-match';

const ifMatchParam = createParamDecorator((required: boolean, context: ExecutionContext) =>
  readIfMatch(context.switchToHttp().getRequest<RequestLike>(), required),
);

/**
 * The version a client read, from a strong ETag in `If-Match` (`"17"` gives `'17'`), for
 * `DocumentLocks.updateIfCurrent()`. Required unless `{ required: false }` (then `undefined`
 * when absent): without it the request is 428, before the handler runs or any lock is taken; a
 * weak, listed or malformed one is 400. A `VersionConflictError` about it becomes 412 (not 409).
 * @example
 * \@Patch(':id')
 * \@VersionETag()
 * rename(@Param('id') id: string, @IfMatch() version: string, @Body() body: { name: string }) {
 *   return this.accounts.updateIfCurrent(id, version, { $set: { name: body.name } });
 * }
 */
export function IfMatch(options: IfMatchOptions = {}): ParameterDecorator {
  const required = options.required !== false;
  return (target, propertyKey, index) => {
    if (propertyKey === undefined) return; // a constructor parameter
    ifMatchParam(required)(target, propertyKey, index);
    const descriptor = Object.getOwnPropertyDescriptor(target, propertyKey);
    if (!descriptor || typeof descriptor.value !== 'function') return;
    const metadata: IfMatchMetadata = { required };
    Reflect.defineMetadata(IF_MATCH_METADATA, metadata, descriptor.value as object);
    useInterceptorOnce(target, propertyKey, descriptor, DocumentHttpInterceptor);
  };
}

/**
 * The route's responses carry `field` (a dotted path) of the returned document as a strong
 * `ETag` (`"17"`; a date as epoch ms) for clients to send back in `If-Match`; none without it.
 * @example
 * \@Get(':id')
 * \@VersionETag('version')
 * get(@Param('id') id: string) { return this.accounts.findOne(id); }
 */
export function VersionETag(field = 'version'): MethodDecorator {
  if (typeof field !== 'string' || field.length === 0) {
    throw new InvalidLockOptionsError(
      '@VersionETag(field) expects the version field, such as "version"',
      { option: 'field' },
    );
  }
  return (target, propertyKey, descriptor) => {
    SetMetadata(VERSION_ETAG_METADATA, field)(target, propertyKey, descriptor);
    useInterceptorOnce(target, propertyKey, descriptor, DocumentHttpInterceptor);
    return descriptor;
  };
}
