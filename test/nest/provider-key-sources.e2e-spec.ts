import { Controller, Get, Injectable, Param, SetMetadata, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  InvalidLockKeyError,
  Locked,
  LockedDocument,
  LockService,
  MongoLockModule,
} from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(60_000);

// A provider method's call has its arguments, not a request: these templates can never render.

@Injectable()
class OrderParams {
  @Locked('orders:{params.id}')
  async pay(_id: string): Promise<void> {}
}

@Injectable()
class BodyInList {
  @Locked(['orders:{args.0}', 'tenant:{body.tenant}'])
  async pay(_id: string): Promise<void> {}
}

@Injectable()
class UserScope {
  @Locked('orders:{args.0}', { scope: 'session:{user.sessionId}' })
  async pay(_id: string): Promise<void> {}
}

@Injectable()
class DocumentByParam {
  @LockedDocument('accounts', '{params.id}')
  async touch(): Promise<void> {}
}

@Injectable()
class HeaderAndQuery {
  @Locked('reports:{headers.x-tenant}:{query.day}')
  async build(): Promise<void> {}
}

/** Fine: arguments on a provider, a key function, request values on a controller. */
@Injectable()
class ArgsProvider {
  @Locked('orders:{args.0.id}', { scope: 'tenant:{args.1}' })
  async pay(_order: { id: string }, _tenant: string): Promise<string | undefined> {
    return LockService.current()?.key;
  }

  @Locked((context) => `fn:${String((context.args[0] as { id: string }).id)}`)
  async byFunction(_order: { id: string }): Promise<void> {}
}

@Controller('orders')
class OrdersController {
  @Get(':id')
  @Locked('orders:{params.id}', { scope: 'user:{user.id}' })
  async get(@Param('id') id: string): Promise<string> {
    return id;
  }
}

/** A handler Nest calls through interceptors (`@SubscribeMessage`): its interceptor fills the context. */
@Injectable()
class GatewayLike {
  @SetMetadata('websockets:message_mapping', true)
  @Locked('gateway:{user.id}')
  async onPing(): Promise<string> {
    return 'pong';
  }
}

describe('@Locked templates a provider method cannot fill are refused at start-up', () => {
  let mongo: TestMongo;

  beforeAll(async () => {
    mongo = await startTestMongo();
  });

  afterAll(async () => {
    await mongo?.stop();
  });

  it.each<[Type, string, string, string]>([
    [OrderParams, 'OrderParams.pay', 'orders:{params.id}', '{params.id}'],
    [BodyInList, 'BodyInList.pay', 'tenant:{body.tenant}', '{body.tenant}'],
    [UserScope, 'UserScope.pay', 'session:{user.sessionId}', '{user.sessionId}'],
    [DocumentByParam, 'DocumentByParam.touch', '{params.id}', '{params.id}'],
    [
      HeaderAndQuery,
      'HeaderAndQuery.build',
      'reports:{headers.x-tenant}:{query.day}',
      '{headers.x-tenant}',
    ],
  ])('%p: naming the method and the template', async (provider, where, template, placeholder) => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        lockModule(mongo, { isGlobal: true }),
        MongoLockModule.forFeature([{ name: 'accounts', collection: 'accounts' }]),
      ],
      providers: [provider],
    }).compile();
    moduleRef.useLogger(false);
    const error = await moduleRef.init().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    await moduleRef.close();
    expect(error).toBeInstanceOf(InvalidLockKeyError);
    const message = (error as Error).message;
    expect(message).toContain(`${where} is a provider method`);
    expect(message).toContain(`lock template ${JSON.stringify(template)} uses ${placeholder}`);
    expect(message).toContain('{args.0}');
  });

  it('starts with argument templates and key functions on providers, request values on controllers and framework handlers', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      controllers: [OrdersController],
      providers: [ArgsProvider, GatewayLike],
    });
    try {
      await expect(app.get(ArgsProvider).pay({ id: '7' }, 'acme')).resolves.toBe('orders:7');
    } finally {
      await app.close();
    }
  });

  it('starts with a controller that is also listed as a provider (to be injected elsewhere)', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      controllers: [OrdersController],
      providers: [OrdersController],
    });
    await app.close();
  });
});
