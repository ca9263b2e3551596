import type { ExecutionContext } from '@nestjs/common';
import type { HttpAdapterHost } from '@nestjs/core';

/**
 * Sets a response header through the HTTP adapter (Express and Fastify alike), unless the
 * response has gone out already: a handler that answered through `@Res()`, or a stream, where
 * Express would throw.
 */
export function setHeaderIfUnsent(
  adapterHost: HttpAdapterHost | undefined,
  context: ExecutionContext,
  name: string,
  value: string,
): void {
  const adapter = adapterHost?.httpAdapter;
  if (!adapter) return;
  const response: unknown = context.switchToHttp().getResponse();
  if (adapter.isHeadersSent(response)) return;
  adapter.setHeader(response, name, value);
}

/**
 * Removes a response header set earlier, unless the response has gone out. Express's response
 * and Fastify's reply both have `removeHeader`; Nest's adapters do not expose one.
 */
export function removeHeaderIfUnsent(
  adapterHost: HttpAdapterHost | undefined,
  context: ExecutionContext,
  name: string,
): void {
  const adapter = adapterHost?.httpAdapter;
  const response = context.switchToHttp().getResponse<{ removeHeader?: (name: string) => void }>();
  if (!adapter || adapter.isHeadersSent(response)) return;
  if (typeof response.removeHeader === 'function') response.removeHeader(name);
}
