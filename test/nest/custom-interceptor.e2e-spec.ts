import {
  ConflictException,
  Controller,
  type ExecutionContext,
  type INestApplication,
  type INestApplicationContext,
  Injectable,
  type NestInterceptor,
  type CallHandler,
  Param,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { defer, firstValueFrom, from, Observable, of, switchMap, tap } from 'rxjs';
import request from 'supertest';
import {
  createLockedDecorator,
  Locked,
  type LockedMetadata,
  LockedInterceptor,
  LockNotAcquiredError,
  LockService,
} from '../../lib';
import { sleep } from '../lock-service/lock-test-kit';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { HTTP_ADAPTERS, lockModule, startAppContext, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

/** Overrides the hooks: a longer Retry-After, 409 instead of 423, a tenant from a cookie-less header. */
@Injectable()
class TenantLockedInterceptor extends LockedInterceptor {
  protected override retryAfterSeconds(error: LockNotAcquiredError): number {
    return Math.max(60, super.retryAfterSeconds(error));
  }

  protected override toLockedException(): unknown {
    return new ConflictException('busy');
  }

  protected override keyContext(context: ExecutionContext, metadata: LockedMetadata) {
    const base = super.keyContext(context, metadata);
    return { ...base, user: { tenant: 'from-hook' } };
  }
}

const TenantLocked = createLockedDecorator(TenantLockedInterceptor);

@Controller('custom')
class CustomController {
  @Post('jobs')
  @TenantLocked('job:{user.tenant}', { timeoutMs: 0 })
  run() {
    return { key: LockService.current()?.key };
  }
}

/** Calls the handler only once subscribed, after a promise turn: inside `@Locked`'s interceptor. */
@Injectable()
class DeferringInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return defer(() => from(Promise.resolve()).pipe(switchMap(() => next.handle())));
  }
}

/** What a follow-up call that a route's Observable schedules saw as its lock. */
let followUp: Promise<unknown> | undefined;

@Controller('inner')
class InnerInterceptorController {
  /** Schedules a call of itself for after the route answered: a call of its own, locked anew. */
  @Post('streams/:id')
  @Locked((context) =>
    context.type === 'http'
      ? `stream:${(context.params as { id: string }).id}`
      : `stream:${String(context.args[0])}`,
  )
  stream(@Param('id') id: string): Observable<{ key: string | undefined }> {
    return of({ key: LockService.current()?.key }).pipe(
      tap(() => {
        if (id !== 'first') return;
        followUp = sleep(100).then(() => firstValueFrom(this.stream('second')));
      }),
    );
  }

  @Post(':id')
  @UseInterceptors(DeferringInterceptor)
  @Locked('inner:{params.id}', { timeoutMs: 0 })
  run(@Param('id') _id: string) {
    return { key: LockService.current()?.key };
  }
}

describe.each(HTTP_ADAPTERS)(
  'a LockedInterceptor subclass through createLockedDecorator (%s)',
  (adapter) => {
    let mongo: TestMongo;
    let app: INestApplication;
    let other: INestApplicationContext;
    const server = () => app.getHttpServer() as Parameters<typeof request>[0];

    beforeAll(async () => {
      mongo = await startTestMongo();
      app = await startHttpApp(
        {
          imports: [lockModule(mongo)],
          controllers: [CustomController, InnerInterceptorController],
        },
        adapter,
      );
      other = await startAppContext({ imports: [lockModule(mongo, { holderId: 'other' })] });
    });

    afterAll(async () => {
      await other?.close();
      await app?.close();
      await mongo?.stop();
    });

    it('uses the overridden key context', async () => {
      const response = await request(server()).post('/custom/jobs').expect(201);
      expect(response.body).toEqual({ key: 'job:from-hook' });
    });

    it('a route with an interceptor inside ours that calls the handler later is locked once, by the route', async () => {
      const response = await request(server()).post('/inner/7').expect(201);
      expect(response.body).toEqual({ key: 'inner:7' });
    });

    it("a call that a route's Observable makes of the same method later is locked on its own", async () => {
      const response = await request(server()).post('/inner/streams/first').expect(201);
      expect(response.body).toEqual({ key: 'stream:first' });
      expect(await followUp).toEqual({ key: 'stream:second' });
    });

    it('uses the overridden error mapping and Retry-After', async () => {
      const held = await other.get(LockService).acquire('job:from-hook', { ttlMs: 5_000 });
      try {
        const response = await request(server()).post('/custom/jobs').expect(409);
        expect(response.headers['retry-after']).toBe('60');
      } finally {
        await held.release();
      }
    });
  },
);
