// Promised (docs/http.md, "Streams and answered responses"): "A handler's Promise cannot be
// stopped, so the lock is kept, and renewed, until it settles", and an interceptor inside the
// lock (listed above @Locked on the method) that stops listening "answers once the handler has
// settled and the lock is released".
//
// The case: an interceptor inside the lock that calls the handler more than once (a
// per-attempt `timeout()` with `retry()`, as Nest's docs write a timeout). The lock waits for
// every call's Promise (`InterceptedCall.enter` in lib/decorators/lock-bindings.ts adds each to
// `runs`); it used to wait for the last one only, so the first call's tail ran unlocked beside
// a second request on the same key.
import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  HttpCode,
  Injectable,
  type INestApplication,
  type NestInterceptor,
  Param,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { retry, timeout, type Observable } from 'rxjs';
import { Locked, LockService } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { eventually, gate, HTTP_ADAPTERS, lockModule, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

/** Calls of the handler still running. */
let running = 0;
let calls = 0;
let firstCall = gate();

/** A per-attempt timeout with one retry, inside the lock (written above @Locked). */
@Injectable()
class AttemptTimeout implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(timeout(500), retry(1));
  }
}

@Controller('jobs')
class JobsController {
  @Post(':id')
  @HttpCode(200)
  @UseInterceptors(AttemptTimeout)
  @Locked('job:{params.id}', { timeoutMs: 0 })
  async run(@Param('id') _id: string) {
    calls += 1;
    running += 1;
    try {
      // The first call outlasts its attempt's timeout; the retry's call answers at once.
      if (calls === 1) await firstCall.opened;
      return { call: calls };
    } finally {
      running -= 1;
    }
  }
}

describe.each(HTTP_ADAPTERS)('@Locked under an inner timeout() + retry() (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      { imports: [lockModule(mongo)], controllers: [JobsController] },
      adapter,
    );
  });

  afterAll(async () => {
    firstCall.open();
    await app?.close();
    await mongo?.stop();
  });

  beforeEach(() => {
    running = 0;
    calls = 0;
    firstCall = gate();
  });

  it('keeps the lock until every call of the handler it made has settled', async () => {
    const locks = app.get(LockService);
    const answered = request(app.getHttpServer())
      .post('/jobs/1')
      .then((r) => r);
    // The first call timed out and the retry called the handler again.
    await eventually(() => calls === 2);
    // Answered (today), or still waiting for the first call (as promised): either way, while
    // the first call runs its lock is held and the key refused to another request.
    await Promise.race([answered, sleep(1_000)]);
    expect(running).toBe(1);
    expect((await locks.inspect('job:1'))?.held).toBe(true);
    const second = await request(app.getHttpServer()).post('/jobs/1');
    expect(second.status).toBe(423);
    firstCall.open();
    expect((await answered).status).toBe(200);
    await eventually(async () => !(await locks.inspect('job:1'))?.held);
  });
});
