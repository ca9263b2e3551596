import { HttpException, Injectable, type INestApplicationContext } from '@nestjs/common';
import { ExternalContextCreator } from '@nestjs/core/helpers/external-context-creator.js';
import { Locked, LockNotAcquiredError, LockService } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(60_000);

/**
 * A provider whose method Nest runs as a handler, through guards and interceptors: what
 * microservice controllers, WebSocket gateways and GraphQL resolvers are. `@Locked` must lock
 * it once (the interceptor), though the instance is also bound as a provider.
 */
@Injectable()
class OrderEventsHandler {
  @Locked('order:{args.0.id}', { timeoutMs: 0 })
  async handle(_data: { id: number }): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

describe('@Locked on handlers of other transports (RPC-like)', () => {
  let mongo: TestMongo;
  let app: INestApplicationContext;
  let other: INestApplicationContext;
  let handle: (data: unknown) => Promise<unknown>;

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startAppContext({ imports: [lockModule(mongo)], providers: [OrderEventsHandler] });
    other = await startAppContext({ imports: [lockModule(mongo, { holderId: 'other' })] });
    const instance = app.get(OrderEventsHandler);
    const create = app.get(ExternalContextCreator);
    // Nest passes the prototype method (the @Locked wrapper) as the callback; so do we.
    const viaPrototype = create.create(
      instance,
      OrderEventsHandler.prototype.handle as never,
      'handle',
      undefined,
      undefined,
      undefined,
      undefined,
      { guards: true, interceptors: true, filters: false },
      'rpc',
    );
    handle = (data) => viaPrototype(data, {});
  });

  afterAll(async () => {
    await other?.close();
    await app?.close();
    await mongo?.stop();
  });

  afterEach(() => jest.restoreAllMocks());

  it('locks the handler exactly once, with args from the payload', async () => {
    const withLock = jest.spyOn(app.get(LockService), 'withLock');
    await expect(handle({ id: 1 })).resolves.toBe('order:1');
    expect(withLock).toHaveBeenCalledTimes(1);
    expect((await app.get(LockService).inspect('order:1'))?.held).toBe(false);
  });

  it('gives the typed LockNotAcquiredError, not an HTTP exception', async () => {
    const held = await other.get(LockService).acquire('order:2', { ttlMs: 30_000 });
    try {
      const error = await handle({ id: 2 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(error).not.toBeInstanceOf(HttpException);
      expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(0);
    } finally {
      await held.release();
    }
  });
});
