import type { ExecutionContext } from '@nestjs/common';

/** What is watched for 'close': a Node response, or an HTTP/1 request's connection. */
interface Closable {
  readonly destroyed?: boolean;
  once(event: 'close', listener: () => void): unknown;
  removeListener(event: 'close', listener: () => void): unknown;
}

/** What is read of Node's `ServerResponse`: Express's response itself, Fastify's `reply.raw`. */
interface NodeResponse extends Closable {
  readonly writableEnded: boolean;
}

function closable(value: unknown): Closable | undefined {
  const candidate = value as Partial<Closable> | null | undefined;
  return typeof candidate?.once === 'function' && typeof candidate.removeListener === 'function'
    ? (candidate as Closable)
    : undefined;
}

/** Fastify's `raw` Node object, or Express's own. */
function rawOf(value: unknown): unknown {
  return (value as { raw?: unknown } | null | undefined)?.raw ?? value;
}

function nodeResponseOf(response: unknown): NodeResponse | undefined {
  const candidate = closable(rawOf(response)) as Partial<NodeResponse> | undefined;
  return typeof candidate?.writableEnded === 'boolean' ? (candidate as NodeResponse) : undefined;
}

/**
 * An HTTP/1 request's connection. A pipelined request's response gets no socket until the ones
 * before it are sent, so it never closes when the client goes: its connection does. HTTP/2
 * streams share a session's socket; a stream's end shows on its response.
 */
function connectionOf(request: unknown): Closable | undefined {
  const raw = rawOf(request) as { httpVersionMajor?: unknown; socket?: unknown } | null | undefined;
  return raw?.httpVersionMajor === 1 ? closable(raw.socket) : undefined;
}

/**
 * Watches for the client of an HTTP request going away before its response was sent, on
 * Express and Fastify alike: the response or the connection closes before the app ended the
 * response (`writableEnded`: an HTTP/2 stream reset reads as finished). The request's 'close'
 * cannot tell: Node emits it once the body is read, the client still there. Undefined off HTTP,
 * or without a Node response to watch. `signal` aborts with `reason()` once the client is gone.
 */
export function watchClientDeparture(
  context: ExecutionContext,
  reason: () => unknown,
): { signal: AbortSignal; stop(): void } | undefined {
  if (context.getType() !== 'http') return undefined;
  const http = context.switchToHttp();
  const response = nodeResponseOf(http.getResponse());
  if (!response) return undefined;
  const departed = new AbortController();
  const onClose = () => {
    if (!response.writableEnded && !departed.signal.aborted) departed.abort(reason());
  };
  const watched = [response, connectionOf(http.getRequest())].filter(
    (target): target is Closable => target !== undefined,
  );
  // Closed already: its 'close' has been emitted.
  if (watched.some((target) => target.destroyed === true)) onClose();
  else for (const target of watched) target.once('close', onClose);
  return {
    signal: departed.signal,
    stop: () => watched.forEach((target) => target.removeListener('close', onClose)),
  };
}
