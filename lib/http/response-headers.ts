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

/** Responses whose `Retry-After` a refused attempt of the library's set. */
const refusedAttempts = new WeakSet<object>();

/** Notes that `context`'s `Retry-After` was set for a refused attempt (see below). */
export function noteRefusalRetryAfter(context: ExecutionContext): void {
  refusedAttempts.add(context.switchToHttp().getResponse<object>());
}

/**
 * Removes the `Retry-After` a refused attempt set, as the request is tried again (an outer
 * `retry()`); never one the application set.
 */
export function removeRefusalRetryAfter(
  adapterHost: HttpAdapterHost | undefined,
  context: ExecutionContext,
): void {
  if (refusedAttempts.delete(context.switchToHttp().getResponse<object>())) {
    removeHeaderIfUnsent(adapterHost, context, 'Retry-After');
  }
}
