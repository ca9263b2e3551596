// @Locked methods reached through inheritance: a subclass's keys name its own class, and an
// override that is @Locked too (as the start-up warning advises) may call super.
import { Controller, Get, Injectable, type INestApplication, Param } from '@nestjs/common';
import request from 'supertest';
import { Locked, LockService } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { HTTP_ADAPTERS, lockModule, startAppContext, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

@Controller('base')
class BasePayments {
  @Get(':id')
  @Locked('pay:{params.id}')
  async pay(@Param('id') id: string): Promise<string> {
    return `${id} under ${LockService.current()?.keys.join(',')}`;
  }
}

@Controller('sub')
class SubPayments extends BasePayments {
  @Get(':id')
  @Locked('pay:{params.id}')
  override async pay(@Param('id') id: string): Promise<string> {
    return super.pay(id);
  }
}

/** The override locks the payment, the base method also its account: two locks, one route. */
@Controller('audited')
class AuditedPayments extends BasePayments {
  @Get(':id')
  @Locked('audit:{params.id}')
  override async pay(@Param('id') id: string): Promise<string> {
    const inner = await super.pay(id);
    return `${inner}; outer ${LockService.current()?.keys.join(',')}`;
  }
}

/** Base methods keyed on their own arguments: a super call passes them. */
class BaseCharges {
  @Locked('charge:{args.0}')
  async charge(id: string): Promise<string> {
    return `${id} under ${LockService.current()?.keys.join(',')}`;
  }

  @Locked((context) => `refund:${String(context.args[0])}:${context.type}`)
  async refund(id: string): Promise<string> {
    return `${id} under ${LockService.current()?.keys.join(',')}`;
  }
}

@Controller('charges')
class Charges extends BaseCharges {
  @Get(':id')
  @Locked('charge:{params.id}')
  override async charge(@Param('id') id: string): Promise<string> {
    return super.charge(id);
  }

  @Get(':id/refund')
  @Locked('refund-route:{params.id}')
  override async refund(@Param('id') id: string): Promise<string> {
    return super.refund(id);
  }
}

abstract class NamedJob {
  @Locked((context) => `job:${context.className}`, { onBusy: 'skip' })
  async run(): Promise<string | undefined> {
    await new Promise((resolve) => setTimeout(resolve, 300));
    return LockService.current()?.key;
  }
}
@Injectable()
class ReportJob extends NamedJob {}
@Injectable()
class EmailJob extends NamedJob {}

describe('@Locked through inheritance', () => {
  let mongo: TestMongo;
  beforeAll(async () => {
    mongo = await startTestMongo();
  });
  afterAll(async () => {
    await mongo?.stop();
  });

  describe.each(HTTP_ADAPTERS)('%s: a @Locked override of a @Locked route', (adapter) => {
    let app: INestApplication;
    beforeAll(async () => {
      app = await startHttpApp(
        { imports: [lockModule(mongo)], controllers: [SubPayments, AuditedPayments, Charges] },
        adapter,
      );
    });
    afterAll(async () => {
      await app?.close();
    });

    it("calls super under the route's lock, its keys read from the request", async () => {
      const response = await request(app.getHttpServer()).get('/sub/7').expect(200);
      expect(response.text).toBe('7 under pay:7');
    });

    it('passes super its own arguments, for keys made of them', async () => {
      const charged = await request(app.getHttpServer()).get('/charges/7').expect(200);
      expect(charged.text).toBe('7 under charge:7');
      const refunded = await request(app.getHttpServer()).get('/charges/9/refund').expect(200);
      expect(refunded.text).toBe('9 under refund:9:method');
    });

    it("takes super's own keys too when they differ", async () => {
      const response = await request(app.getHttpServer()).get('/audited/8').expect(200);
      expect(response.text).toBe('8 under pay:8; outer audit:8');
    });
  });

  it("gives a key function the instance's class, so subclasses lock apart", async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      providers: [ReportJob, EmailJob],
    });
    try {
      const keys = await Promise.all([app.get(ReportJob).run(), app.get(EmailJob).run()]);
      expect(keys).toEqual(['job:ReportJob', 'job:EmailJob']);
    } finally {
      await app.close();
    }
  });
});
