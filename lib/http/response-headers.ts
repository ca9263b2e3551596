import type { ExecutionContext } from '@nestjs/common';
import type { HttpAdapterHost } from '@nestjs/core';

/**
 * The response of `context` and its adapter, while the response has not gone out yet: after a
 * handler that answered through `@Res()`, or a stream, Express throws on header changes.
 */
function unsentResponse(adapterHost: HttpAdapterHost | undefined, context: ExecutionContext) {
  const adapter = adapterHost?.httpAdapter;
  if (!adapter) return undefined;
  const response = context.switchToHttp().getResponse<{ removeHeader?: (name: string) => void }>();
  return adapter.isHeadersSent(response) ? undefined : { adapter, response };
}

/** Sets a response header through the HTTP adapter (Express and Fastify alike), if still unsent. */
export function setHeaderIfUnsent(
  adapterHost: HttpAdapterHost | undefined,
  context: ExecutionContext,
  name: string,
  value: string,
): void {
  const unsent = unsentResponse(adapterHost, context);
  unsent?.adapter.setHeader(unsent.response, name, value);
}

/** Removes a header set earlier, if still unsent (by `removeHeader`: Nest's adapters lack one). */
export function removeHeaderIfUnsent(
  adapterHost: HttpAdapterHost | undefined,
  context: ExecutionContext,
  name: string,
): void {
  unsentResponse(adapterHost, context)?.response.removeHeader?.(name);
}

/** Per response whose `Retry-After` a refused attempt set: the value it had before (the app's). */
type HeaderValue = string | number | readonly string[] | undefined;
const beforeRefusal = new WeakMap<object, { value: HeaderValue }>();

/** Notes `context`'s `Retry-After` before a refused attempt sets its own (see below). */
export function noteRefusalRetryAfter(context: ExecutionContext): void {
  const response = context
    .switchToHttp()
    .getResponse<{ getHeader?: (name: string) => HeaderValue }>();
  if (!beforeRefusal.has(response)) {
    beforeRefusal.set(response, { value: response.getHeader?.('Retry-After') });
  }
}

/**
 * Puts back the `Retry-After` a refused attempt replaced, as the request is tried again (an
 * outer `retry()`): the application's own, or none.
 */
export function restoreRetryAfter(
  adapterHost: HttpAdapterHost | undefined,
  context: ExecutionContext,
): void {
  const response = context.switchToHttp().getResponse<object>();
  const before = beforeRefusal.get(response);
  if (!before) return;
  beforeRefusal.delete(response);
  const { value } = before;
  if (value === undefined) return removeHeaderIfUnsent(adapterHost, context, 'Retry-After');
  const text = Array.isArray(value) ? value.join(', ') : String(value);
  setHeaderIfUnsent(adapterHost, context, 'Retry-After', text);
}
