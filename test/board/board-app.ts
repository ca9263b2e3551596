import { Logger } from '@nestjs/common';
import type {
  CanActivate,
  ExecutionContext,
  INestApplication,
  ModuleMetadata,
} from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';

/**
 * The test's guard: lets every read through, and a release only with `x-operator`, whose
 * value becomes `request.user.id` (what the board logs as who asked).
 */
export class OperatorHeaderGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      method: string;
      headers: Record<string, string | undefined>;
      user?: { id: string };
    }>();
    if (request.method === 'GET') return true;
    const operator = request.headers['x-operator'];
    if (!operator) return false;
    request.user = { id: operator };
    return true;
  }
}

/**
 * Lets every request through, except the event stream while `EventsGate.mode` says otherwise:
 * `refuse` answers 403 (an operator whose access ended), `drop` cuts the connection (a network
 * failure).
 */
export class EventsGate implements CanActivate {
  static mode: 'open' | 'refuse' | 'drop' = 'open';
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      url: string;
      socket?: { destroy(): void };
      raw?: { socket: { destroy(): void } };
    }>();
    if (EventsGate.mode === 'open' || !request.url.includes('/api/events')) return true;
    if (EventsGate.mode === 'drop') (request.raw ?? request).socket?.destroy();
    return false;
  }
}

/** An application listening on a local port (the browser and SSE need a real server). */
export async function listeningApp(
  metadata: ModuleMetadata,
  adapter: 'express' | 'fastify',
): Promise<{ app: INestApplication; url: string }> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const app =
    adapter === 'fastify'
      ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
      : moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { app, url };
}

/** Collects the board's forced-release log lines. */
export function watchBoardLog(): { lines: string[]; restore(): void } {
  const lines: string[] = [];
  const spy = jest.spyOn(Logger.prototype, 'warn').mockImplementation(function (
    this: Logger,
    message: unknown,
  ) {
    if ((this as unknown as { context?: string }).context === 'MongoLockBoard') {
      lines.push(String(message));
    }
  });
  return { lines, restore: () => spy.mockRestore() };
}

/** One event of a `text/event-stream`, as an EventSource parses it. */
export interface StreamEvent {
  type: string;
  data: string;
  retry?: number;
}

/**
 * Reads the events of an SSE response until `enough` says so or the server ends the stream
 * (`ended`).
 */
export async function readEvents(
  response: Response,
  enough: (events: StreamEvent[]) => boolean,
): Promise<{ events: StreamEvent[]; ended: boolean }> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const events: StreamEvent[] = [];
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return { events, ended: true };
    text += decoder.decode(value, { stream: true });
    const blocks = text.split('\n\n');
    text = blocks.pop()!;
    for (const block of blocks) {
      const event: StreamEvent = { type: 'message', data: '' };
      for (const line of block.split('\n')) {
        const [field, ...rest] = line.split(':');
        const value = rest.join(':').replace(/^ /, '');
        if (field === 'event') event.type = value;
        if (field === 'data') event.data = value;
        if (field === 'retry') event.retry = Number(value);
      }
      if (block.split('\n').some((line) => /^(event|data|retry):/.test(line))) events.push(event);
    }
    if (enough(events)) {
      await reader.cancel();
      return { events, ended: false };
    }
  }
}
