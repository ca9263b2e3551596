import type { ExecutionContext } from '@nestjs/common';

/** What is read of Node's `ServerResponse`: Express's response itself, Fastify's `reply.raw`. */
interface NodeResponse {
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  once(event: 'close', listener: () => void): unknown;
  removeListener(event: 'close', listener: () => void): unknown;
}

export interface ClientDeparture {
  /** Aborts, with the reason given, once the client has gone away. */
  readonly signal: AbortSignal;
  /** Stops watching the response. */
  stop(): void;
}

function nodeResponseOf(response: unknown): NodeResponse | undefined {
  const raw = (response as { raw?: unknown } | null | undefined)?.raw ?? response;
  const candidate = raw as Partial<NodeResponse> | null | undefined;
  return typeof candidate?.once === 'function' &&
    typeof candidate.removeListener === 'function' &&
    typeof candidate.writableFinished === 'boolean'
    ? (candidate as NodeResponse)
    : undefined;
}

/**
 * Watches for the client of an HTTP request going away before its response was sent, on
 * Express and Fastify alike: the response closes unfinished (its socket closed). The request's
 * 'close' cannot tell: Node emits it once the body is read, the client still there. Undefined
 * off HTTP, or without a Node response to watch.
 */
export function watchClientDeparture(
  context: ExecutionContext,
  reason: () => unknown,
): ClientDeparture | undefined {
  if (context.getType() !== 'http') return undefined;
  const response = nodeResponseOf(context.switchToHttp().getResponse());
  if (!response) return undefined;
  const departed = new AbortController();
  const onClose = () => {
    if (!response.writableFinished) departed.abort(reason());
  };
  // Closed already: its 'close' has been emitted.
  if (response.destroyed) {
    onClose();
    return { signal: departed.signal, stop: () => undefined };
  }
  response.once('close', onClose);
  return { signal: departed.signal, stop: () => response.removeListener('close', onClose) };
}
