import type { ExecutionContext } from '@nestjs/common';

/** Nest's `SSE_METADATA`: the same value in Nest 10 to 12, whose export moved between them. */
const SSE_METADATA = '__sse__';

/** Whether the handler is an `@Sse()` route: Nest sends each value it emits as an event. */
export function isSseRoute(context: ExecutionContext): boolean {
  return (
    context.getType() === 'http' && Reflect.getMetadata(SSE_METADATA, context.getHandler()) === true
  );
}
