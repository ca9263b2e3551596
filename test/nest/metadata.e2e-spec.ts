import {
  Controller,
  Get,
  Header,
  HttpCode,
  type INestApplication,
  Param,
  Post,
  SetMetadata,
} from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { APP_INTERCEPTOR, Reflector } from '@nestjs/core';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import {
  InvalidLockKeyError,
  Locked,
  LockedInterceptor,
  LockService,
  MongoLockError,
} from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { TS_CHILD_FLAGS } from '@nestjs-mongo-lock/process-harness';
import { lockModule, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

/** The same decorators with @Locked first (outermost) and last (innermost). */
@Controller('meta')
class DecoratorOrderController {
  @Locked('meta:{params.id}')
  @SetMetadata('role', 'admin')
  @Header('X-Order', 'first')
  @HttpCode(201)
  @Get('first/:id')
  lockedFirst(@Param('id') id: string) {
    return { id, key: LockService.current()?.key };
  }

  @Post('last/:id')
  @HttpCode(201)
  @Header('X-Order', 'last')
  @SetMetadata('role', 'admin')
  @Locked('meta:{params.id}')
  lockedLast(@Param('id') id: string) {
    return { id, key: LockService.current()?.key };
  }
}

describe('@Locked keeps route, Swagger and custom metadata, whatever the order', () => {
  let mongo: TestMongo;
  let app: INestApplication;

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      {
        imports: [lockModule(mongo)],
        controllers: [DecoratorOrderController],
        // Registered globally as well, by mistake: must not lock a second time.
        providers: [{ provide: APP_INTERCEPTOR, useClass: LockedInterceptor }],
      },
      'express',
    );
  });

  afterAll(async () => {
    await app?.close();
    await mongo?.stop();
  });

  const prototype = DecoratorOrderController.prototype;

  it.each([
    ['lockedFirst', 'first/:id', 0],
    ['lockedLast', 'last/:id', 1],
  ] as const)('%s keeps its route path and method', (method, path, requestMethod) => {
    expect(Reflect.getMetadata(PATH_METADATA, prototype[method])).toBe(path);
    expect(Reflect.getMetadata(METHOD_METADATA, prototype[method])).toBe(requestMethod);
    expect(prototype[method].name).toBe(method);
  });

  it.each([['lockedFirst'], ['lockedLast']] as const)('%s keeps SetMetadata', (method) => {
    expect(app.get(Reflector).get('role', prototype[method])).toBe('admin');
  });

  it('keeps @ApiOperation, @ApiResponse, @ApiTags and params in the Swagger document', async () => {
    // @nestjs/swagger does not load under Jest's ESM-to-CommonJS transform; Node loads it.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [...TS_CHILD_FLAGS, join(__dirname, 'fixtures/swagger-document.ts')],
      { cwd: join(__dirname, '../..') },
    );
    const paths = JSON.parse(stdout) as Record<string, Record<string, Record<string, unknown>>>;
    for (const [path, verb, summary] of [
      ['/meta/first/{id}', 'get', 'locked first'],
      ['/meta/last/{id}', 'post', 'locked last'],
    ]) {
      expect(paths[path]?.[verb]).toMatchObject({
        summary,
        tags: ['meta'],
        parameters: [expect.objectContaining({ name: 'id', in: 'path' }) as unknown],
        responses: { 423: { description: 'Locked' } },
      });
    }
  });

  it.each([
    ['get', '/meta/first/1', 'first'],
    ['post', '/meta/last/2', 'last'],
  ] as const)('%s %s serves with its status, header, params and lock', async (verb, url, order) => {
    const withLock = jest.spyOn(app.get(LockService), 'withLock');
    const agent = request(app.getHttpServer() as Parameters<typeof request>[0]);
    const response = await agent[verb](url).expect(201);
    expect(withLock).toHaveBeenCalledTimes(1);
    withLock.mockRestore();
    expect(response.headers['x-order']).toBe(order);
    expect(response.body).toEqual({ id: url.slice(-1), key: `meta:${url.slice(-1)}` });
  });
});

describe('@Locked refuses mistakes when the class is defined', () => {
  it.each([
    ['a __proto__ path', 'x:{body.__proto__.id}'],
    ['a constructor path', 'x:{args.0.constructor}'],
    ['a prototype path', 'x:{user.prototype}'],
    ['an unknown source', 'x:{session.id}'],
    ['an unclosed brace', 'x:{params.id'],
  ])('%s', (_label, template) => {
    expect(() => {
      class Mistaken {
        @Locked(template)
        run() {}
      }
      return Mistaken;
    }).toThrow(InvalidLockKeyError);
  });

  it('a bad option, naming it', () => {
    expect(() => {
      class Mistaken {
        @Locked('x', { ttlMs: 5 })
        run() {}
      }
      return Mistaken;
    }).toThrow(/Mistaken\.run: option ttlMs must be an integer from 1000/);
    expect(() => {
      class Mistaken {
        @Locked('x', { timeout: 5 } as never)
        run() {}
      }
      return Mistaken;
    }).toThrow(
      /Mistaken\.run: timeout is not an option \(did you mean timeoutMs\?\); the options are ttlMs, timeoutMs, renew/,
    );
  });

  it('@Locked twice on one method', () => {
    expect(() => {
      class Twice {
        @Locked('a')
        @Locked('b')
        run() {}
      }
      return Twice;
    }).toThrow(MongoLockError);
  });
});
