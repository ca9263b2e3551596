import {
  type CallHandler,
  Controller,
  Get,
  type INestApplication,
  type INestApplicationContext,
  Injectable,
  type NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { defer, from, retry, type Observable } from 'rxjs';
import request from 'supertest';
import { Locked, LockService } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { HTTP_ADAPTERS, lockModule, startAppContext, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

/** An application's own interceptor outside `@Locked`, trying a refused request again. */
@Injectable()
class RetryOnce implements NestInterceptor {
  /** Runs between the refused attempt and the next. */
  static beforeRetry: () => Promise<unknown> = () => Promise.resolve();
  static attempts = 0;

  intercept(_context: unknown, next: CallHandler): Observable<unknown> {
    return defer(() => {
      RetryOnce.attempts += 1;
      return next.handle();
    }).pipe(retry({ count: 1, delay: () => from(RetryOnce.beforeRetry()) }));
  }
}

@Controller('retried')
@UseInterceptors(RetryOnce)
class RetriedController {
  @Get()
  @Locked('retried', { timeoutMs: 0 })
  get(): string {
    return 'done';
  }
}

describe.each(HTTP_ADAPTERS)('@Locked under an outer retry() (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let other: INestApplicationContext;

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      { imports: [lockModule(mongo)], controllers: [RetriedController], providers: [RetryOnce] },
      adapter,
    );
    other = await startAppContext({ imports: [lockModule(mongo, { holderId: 'other' })] });
  });

  afterAll(async () => {
    await other?.close();
    await app?.close();
    await mongo?.stop();
  });

  it("answers the attempt that succeeded without the refused attempt's Retry-After", async () => {
    RetryOnce.attempts = 0;
    const held = await other.get(LockService).acquire('retried', { ttlMs: 30_000 });
    // The first attempt is refused (423, Retry-After: 30); the next takes the lock.
    RetryOnce.beforeRetry = () => held.release();
    const server = app.getHttpServer() as Parameters<typeof request>[0];

    const response = await request(server).get('/retried').expect(200, 'done');

    expect(RetryOnce.attempts).toBe(2);
    expect(response.headers['retry-after']).toBeUndefined();
  });
});
