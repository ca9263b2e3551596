import {
  Controller,
  Get,
  type INestApplication,
  Injectable,
  Logger,
  Param,
  Scope,
} from '@nestjs/common';
import { Interval, ScheduleModule } from '@nestjs/schedule';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { Locked, LockNotAcquiredError, LockService, MongoLockError } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { eventually, gate, lockModule, startAppContext, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

// Calls of a controller's @Locked method that do not come through its route (so not through
// LockedInterceptor) lock as a provider method's do, or fail; they never run unlocked.

/** How many runs of `IntervalJobsController.job` overlapped, at most, and the keys they held. */
const intervalRuns = { running: 0, most: 0, count: 0, keys: new Set<string>() };

@Controller('jobs')
class IntervalJobsController {
  // Fires every 50 ms, runs 200 ms: unlocked, runs overlap.
  @Interval(50)
  @Locked('controller-job', { onBusy: 'skip' })
  async job(): Promise<void> {
    intervalRuns.running += 1;
    intervalRuns.most = Math.max(intervalRuns.most, intervalRuns.running);
    intervalRuns.keys.add(LockService.current()?.key ?? 'unlocked');
    await sleep(200);
    intervalRuns.running -= 1;
    intervalRuns.count += 1;
  }
}

@Controller('orders')
class OrdersController {
  static readonly holds = new Map<string, Promise<void>>();
  static bodyRuns = 0;

  /** Called through `this` by the route below, not by Nest. */
  @Locked('order-helper:{args.0}', { timeoutMs: 0 })
  async helper(id: string): Promise<string> {
    await OrdersController.holds.get(id);
    return LockService.current()?.key ?? 'unlocked';
  }

  @Get(':id')
  async get(@Param('id') id: string): Promise<{ key: string }> {
    try {
      return { key: await this.helper(id) };
    } catch (error) {
      if (error instanceof LockNotAcquiredError) return { key: 'busy' };
      throw error;
    }
  }

  /** A route whose key needs the request: a call from elsewhere has none. */
  @Get('pay/:id')
  @Locked('order-pay:{params.id}')
  async pay(): Promise<string> {
    OrdersController.bodyRuns += 1;
    return LockService.current()?.key ?? 'unlocked';
  }
}

@Controller({ path: 'per-request', scope: Scope.REQUEST })
class PerRequestController {
  @Locked('per-request-helper')
  async helper(): Promise<string> {
    return LockService.current()?.key ?? 'unlocked';
  }

  @Get()
  async get(): Promise<string> {
    return await this.helper();
  }
}

@Injectable({ scope: Scope.TRANSIENT })
class TransientAudit {
  @Locked('audit:{args.0}')
  async record(id: string): Promise<string | undefined> {
    return LockService.current()?.key ?? `unlocked ${id}`;
  }
}

@Controller({ path: 'audited', scope: Scope.REQUEST })
class AuditedController {
  constructor(readonly audit: TransientAudit) {}
}

describe('@Locked controller methods called other than as routes', () => {
  let mongo: TestMongo;

  beforeAll(async () => {
    mongo = await startTestMongo();
  });

  afterAll(async () => {
    await mongo?.stop();
  });

  afterEach(() => jest.restoreAllMocks());

  it('locks an @Interval job on a controller: its runs never overlap', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo), ScheduleModule.forRoot()],
      controllers: [IntervalJobsController],
    });
    try {
      await eventually(() => intervalRuns.count >= 3);
    } finally {
      await app.close();
    }
    expect(intervalRuns.most).toBe(1);
    expect([...intervalRuns.keys]).toEqual(['controller-job']);
  });

  describe('over HTTP', () => {
    let app: INestApplication;
    const server = () => app.getHttpServer() as Parameters<typeof request>[0];

    beforeAll(async () => {
      app = await startHttpApp(
        {
          imports: [lockModule(mongo)],
          controllers: [OrdersController, PerRequestController],
        },
        'express',
      );
    });

    afterAll(async () => {
      await app?.close();
    });

    it('locks a helper a handler calls through this: two calls never run at once', async () => {
      const held = gate();
      OrdersController.holds.set('1', held.opened);
      // then() sends it: supertest sends nothing until asked for its response.
      const first = request(server())
        .get('/orders/1')
        .then((response) => response.body as unknown);
      try {
        const locks = app.get(LockService);
        await eventually(async () => (await locks.inspect('order-helper:1'))?.held === true);
        const second = await request(server()).get('/orders/1');
        expect(second.body).toEqual({ key: 'busy' });
      } finally {
        held.open();
      }
      expect(await first).toEqual({ key: 'order-helper:1' });
    });

    it('locks the controller method called on the instance Nest made, keyed by its arguments', async () => {
      OrdersController.holds.delete('2');
      await expect(app.get(OrdersController).helper('2')).resolves.toBe('order-helper:2');
    });

    it('fails a call of a route needing the request made outside it, without running it', async () => {
      const before = OrdersController.bodyRuns;
      const call = app.get(OrdersController).pay();
      await expect(call).rejects.toBeInstanceOf(MongoLockError);
      await expect(call).rejects.toThrow(
        /OrdersController\.pay is @Locked with "order-pay:\{params\.id\}", which reads \{params\.id\} from the request, but it was called outside its route .*a decorator written above @Locked/,
      );
      expect(OrdersController.bodyRuns).toBe(before);
      // Through its route it locks as before, once.
      const response = await request(server()).get('/orders/pay/7').expect(200);
      expect(response.text).toBe('order-pay:7');
    });

    it('fails a request-scoped controller’s call that is not its route, rather than run unlocked', async () => {
      await request(server()).get('/per-request').expect(500);
      const instance = await app.resolve(PerRequestController);
      await expect(instance.helper()).rejects.toThrow(
        /PerRequestController\.helper is @Locked on a request-scoped controller and was called outside its route/,
      );
    });

    it('still runs a controller made with new (a unit test) as is', async () => {
      await expect(new OrdersController().helper('3')).resolves.toBe('unlocked');
    });
  });

  it('warns at start-up of a transient @Locked provider a request-scoped consumer injects', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      providers: [TransientAudit],
      controllers: [AuditedController],
    });
    try {
      expect(warn).toHaveBeenCalledWith(
        expect.stringContaining(
          'Cannot lock TransientAudit.record where a request-scoped provider or controller injects it',
        ),
      );
    } finally {
      await app.close();
    }
  });
});
