import { Controller, Injectable, Logger, Module, Param, Post } from '@nestjs/common';
import type { ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Locked } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule } from './support/nest-apps';

jest.setTimeout(60_000);

@Injectable()
class LedgerService {
  @Locked('ledger:{args.0}')
  async post(account: string): Promise<string> {
    return `posted ${account}`;
  }
}

@Controller('orders')
class OrdersController {
  @Post(':id/pay')
  @Locked('order:{params.id}', { timeoutMs: 0 })
  pay(@Param('id') id: string): string {
    return `paid ${id}`;
  }
}

// A second module using @Locked: Nest makes an interceptor in each, the warning comes once.
@Controller('refunds')
class RefundsController {
  @Post(':id')
  @Locked('refund:{params.id}', { timeoutMs: 0 })
  refund(@Param('id') id: string): string {
    return `refunded ${id}`;
  }
}

@Module({ controllers: [RefundsController] })
class RefundsModule {}

const MISSING = /@Locked is used in this application, but no MongoLockModule is imported/;

/** Starts an HTTP application and returns it with the warnings Nest's Logger got meanwhile. */
async function startWarned(metadata: ModuleMetadata) {
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  try {
    const moduleRef = await Test.createTestingModule(metadata).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    return { app, warnings: warn.mock.calls.map(([message]) => String(message)) };
  } finally {
    warn.mockRestore();
  }
}

describe('an application using @Locked without MongoLockModule', () => {
  let mongo: TestMongo;

  beforeAll(async () => {
    mongo = await startTestMongo();
  });

  afterAll(async () => {
    await mongo?.stop();
  });

  it('starts, and warns once at bootstrap naming what to import', async () => {
    const { app, warnings } = await startWarned({
      imports: [RefundsModule],
      controllers: [OrdersController],
      providers: [LedgerService],
    });
    try {
      expect(warnings.filter((message) => MISSING.test(message))).toEqual([
        '@Locked is used in this application, but no MongoLockModule is imported: every locked ' +
          'route and method call will fail. Import MongoLockModule.forRoot() or forRootAsync() ' +
          '(in tests, MongoLockTestingModule.forRoot())',
      ]);
      // As warned: the locked route fails.
      await request(app.getHttpServer() as Parameters<typeof request>[0])
        .post('/orders/1/pay')
        .expect(500);
    } finally {
      await app.close();
    }
  });

  it('does not warn when the module is imported', async () => {
    const { app, warnings } = await startWarned({
      imports: [lockModule(mongo, { isGlobal: true }), RefundsModule],
      controllers: [OrdersController],
      providers: [LedgerService],
    });
    try {
      expect(warnings.filter((message) => MISSING.test(message))).toEqual([]);
      await request(app.getHttpServer() as Parameters<typeof request>[0])
        .post('/orders/1/pay')
        .expect(201, 'paid 1');
    } finally {
      await app.close();
    }
  });
});
