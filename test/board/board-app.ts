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
