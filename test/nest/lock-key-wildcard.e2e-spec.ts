/**
 * Promised (docs/http.md, "Values are escaped"; `lockKey`'s doc comment): "To build the same
 * key by hand (for `withLock`, or a scope for `releaseScope`), fill the same template with
 * `lockKey`: `lockKey('order:{params.id}', { params: { id } })` is the key the route locks for
 * that `id`", each value "escaped as the decorator escapes it". The same guide documents an
 * HTTP route's wildcard parameter (`@Get('files/*path')` on Express 5, whose value is an array of
 * segments) as a value the route locks on, as its normalised path.
 *
 * What happens instead: given the very params the route locked on, `lockKey` throws
 * `InvalidLockKeyError` ("{params.path} is an array"), so code that must meet such a route (a
 * `withLock` elsewhere, a `releaseScope`) cannot build its key with `lockKey`; a string path
 * (`'a/b'`) gives the route's key only for paths already normalised (`'a//b'` does not).
 *
 * Where: lib/keys/key-template.ts, `renderKeyTemplate` reads a wildcard path only when
 * `context.type === 'http'`, and `lockKey` renders with `type: 'method'`.
 */
import { Controller, Get, type INestApplication, Param } from '@nestjs/common';
import request from 'supertest';
import { Locked, LockService, lockKey } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

const TEMPLATE = 'file:{params.path}';

@Controller('files')
class FilesController {
  @Get('*path')
  @Locked(TEMPLATE, { timeoutMs: 0 })
  file(@Param() params: Record<string, unknown>) {
    let byHand: string;
    try {
      byHand = lockKey(TEMPLATE, { params });
    } catch (error) {
      byHand = `lockKey threw: ${(error as Error).message}`;
    }
    return { locked: LockService.current()?.key, byHand };
  }
}

// Nest's Fastify adapter refuses a `*name` path: Express only.
describe('lockKey meets a @Locked route with a wildcard parameter (express)', () => {
  let mongo: TestMongo;
  let app: INestApplication;
  const server = () => app.getHttpServer() as Parameters<typeof request>[0];

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      { imports: [lockModule(mongo)], controllers: [FilesController] },
      'express',
    );
  });

  afterAll(async () => {
    await app?.close();
    await mongo?.stop();
  });

  it.each(['/files/a', '/files/a/b', '/files/a//b/', '/files/a/x/%2E%2E/b'])(
    'lockKey(template, { params }) is the key the route locked for %s',
    async (path) => {
      const { body } = await request(server()).get(path).expect(200);
      const { locked, byHand } = body as { locked: string; byHand: string };
      expect(locked).toMatch(/^file:/);
      expect(byHand).toBe(locked);
    },
  );
});
