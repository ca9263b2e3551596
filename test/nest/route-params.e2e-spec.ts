import { Controller, Get, type INestApplication, Logger, Post } from '@nestjs/common';
import request from 'supertest';
import { Locked, LockService } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { HTTP_ADAPTERS, lockModule, openLockCollection, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

@Controller('orders')
class OrdersController {
  // The route has :id; the template names orderId, which no request can supply.
  @Post(':id/refund')
  @Locked('refund:{params.orderId}', { timeoutMs: 0 })
  refund(): string {
    return 'refunded';
  }

  @Post(':id/pay')
  @Locked('pay:{params.id}', { timeoutMs: 0 })
  pay(): string {
    return 'paid';
  }

  // A missing query value is the client's: still 400.
  @Get('search')
  @Locked('search:{query.term}', { timeoutMs: 0 })
  search(): string {
    return 'found';
  }
}

@Controller('tenants/:tenant')
class TenantItemsController {
  // Parameters of the controller's path and the method's count, when every one of its paths has them.
  @Get(['items/:id', 'things/:id/:thing'])
  @Locked('item:{params.tenant}:{params.id}', { timeoutMs: 0 })
  item(): string {
    return 'item';
  }
}

describe.each(HTTP_ADAPTERS)('@Locked with a {params.x} its route lacks (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let collection: Awaited<ReturnType<typeof openLockCollection>>;
  let startWarnings: string[];
  const server = () => app.getHttpServer() as Parameters<typeof request>[0];

  beforeAll(async () => {
    mongo = await startTestMongo();
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      app = await startHttpApp(
        { imports: [lockModule(mongo)], controllers: [OrdersController, TenantItemsController] },
        adapter,
      );
      startWarnings = warn.mock.calls.map(([message]) => String(message));
    } finally {
      warn.mockRestore();
    }
    collection = await openLockCollection(mongo);
  });

  afterAll(async () => {
    await collection?.close();
    await app?.close();
    await mongo?.stop();
  });

  afterEach(() => jest.restoreAllMocks());

  it('warns at start-up about that handler only, naming the template and the parameter', () => {
    expect(
      startWarnings.filter((message) => /not every route of its paths has/.test(message)),
    ).toEqual([
      'OrdersController.refund is @Locked with "refund:{params.orderId}", but not every route ' +
        'of its paths has the parameter "orderId" (every one has: id): unless a global prefix ' +
        'or a RouterModule path adds it, the requests without it will fail with a server error',
    ]);
  });

  it('answers every request 500 and logs the template and the placeholder, writing nothing', async () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const response = await request(server()).post('/orders/7/refund').expect(500);
    expect(response.body).toMatchObject({ statusCode: 500 });
    expect(JSON.stringify(response.body)).not.toContain('orderId');
    const messages = logged.mock.calls.map(([error]) =>
      error instanceof Error ? error.message : String(error),
    );
    expect(messages).toEqual([
      expect.stringMatching(
        /^Lock key template "refund:\{params\.orderId\}": \{params\.orderId\} has no value in this http call: route parameters come from the route's path/,
      ),
    ]);
    expect(await collection.locks.countDocuments({ _id: { $regex: '^refund:' } })).toBe(0);
  });

  it('still answers 400 for a missing query value, and locks routes whose parameters exist', async () => {
    const response = await request(server()).get('/orders/search').expect(400);
    expect(response.body).toMatchObject({
      statusCode: 400,
      message: expect.stringMatching(/\{query\.term\} has no value in this http call$/) as unknown,
    });
    await request(server()).post('/orders/7/pay').expect(201, 'paid');
    await request(server()).get('/tenants/t1/items/9').expect(200, 'item');
  });
});

@Controller('files')
class FilesController {
  // Express 5 (path-to-regexp v8) gives a wildcard parameter as its path's segments.
  @Get('*path')
  @Locked('file:{params.path}', { timeoutMs: 0 })
  file(): string | undefined {
    return LockService.current()?.key;
  }
}

// Nest's Fastify adapter refuses a `*name` path.
describe('@Locked with a wildcard route parameter (express)', () => {
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

  it('locks the path its segments make', async () => {
    await request(server()).get('/files/a').expect(200, 'file:a');
    await request(server()).get('/files/a/b:c').expect(200, 'file:a/b%3Ac');
    await request(server()).get('/files/a%2Fb').expect(200, 'file:a/b');
  });
});
