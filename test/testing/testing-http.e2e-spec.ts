import { Controller, HttpCode, type INestApplication, Param, Post } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { type LockHandle, LockHandleParam, Locked } from '../../lib';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';

jest.setTimeout(30_000);

@Controller('orders')
class OrdersController {
  @Post(':id/pay')
  @HttpCode(200)
  @Locked('order:{params.id}', { timeoutMs: 0 })
  async pay(@Param('id') id: string, @LockHandleParam() lock: LockHandle) {
    return { id, key: lock.key, fence: lock.fence.toString() };
  }
}

describe.each(['express', 'fastify'] as const)(
  '@Locked controllers on the testing module (%s)',
  (adapter) => {
    let app: INestApplication;
    let store: LockTestingStore;
    const server = () => app.getHttpServer() as Parameters<typeof request>[0];

    beforeAll(async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [MongoLockTestingModule.forRoot()],
        controllers: [OrdersController],
      }).compile();
      app =
        adapter === 'fastify'
          ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
          : moduleRef.createNestApplication({ logger: false });
      await app.init();
      if (adapter === 'fastify') {
        await (app.getHttpAdapter().getInstance() as { ready(): Promise<void> }).ready();
      }
      store = app.get(LockTestingStore);
    });

    afterAll(async () => {
      await app?.close();
    });

    it('answers 423 Locked with Retry-After while someone else holds the key', async () => {
      const other = await store.holdAs('order:42', 'billing-worker', 5_000);
      const busy = await request(server()).post('/orders/42/pay').expect(423);
      expect(busy.headers['retry-after']).toBe('5');
      expect(busy.body).toMatchObject({ statusCode: 423, error: 'Locked' });

      await other.release();
      const paid = await request(server()).post('/orders/42/pay').expect(200);
      expect(paid.body).toMatchObject({ id: '42', key: 'order:42' });
      expect(BigInt(paid.body.fence as string)).toBeGreaterThan(other.fence);
      expect(store.inspect('order:42')?.held).toBe(false);
    });

    it('answers 200 once an expired holder no longer counts', async () => {
      await store.holdAs('order:43', 'stalled-worker', 60_000);
      await request(server()).post('/orders/43/pay').expect(423);
      store.expire('order:43');
      await request(server()).post('/orders/43/pay').expect(200);
    });
  },
);
