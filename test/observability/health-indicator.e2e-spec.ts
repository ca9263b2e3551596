import { Controller, Get, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import request from 'supertest';
import { LockService, MongoLockModule, type Leadership } from '../../lib';
import { MongoLockHealthIndicator } from '../../lib/health';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startHttpApp } from '../nest/support/nest-apps';

jest.setTimeout(60_000);

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly locks: MongoLockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.locks.isHealthy('locks', { timeoutMs: 500 })]);
  }
}

describe('MongoLockHealthIndicator', () => {
  let mongo: TestMongo;

  /** Another instance leads the leadership's name, so this one follows. */
  async function lockedElsewhere(leadership: Leadership): Promise<() => Promise<void>> {
    const elsewhere = new LockService({ uri: mongo.uri, dbName: mongo.dbName });
    const term = await elsewhere.leadership(leadership.name).campaign();
    return async () => {
      await term.resign();
      await elsewhere.close();
    };
  }
  let app: INestApplication | undefined;

  beforeAll(async () => {
    mongo = await startTestMongo();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(() => mongo.stop());

  it('is up when MongoDB answers, with the change stream state', async () => {
    app = await startHttpApp(
      {
        imports: [TerminusModule.forRoot({ logger: false }), lockModule(mongo)],
        controllers: [HealthController],
        providers: [MongoLockHealthIndicator],
      },
      'express',
    );
    const response = await request(app.getHttpServer()).get('/health').expect(200);
    expect(response.body.info.locks).toMatchObject({
      status: 'up',
      store: 'reachable',
      // Engine v2's change stream is open while the service runs.
      changeStream: 'established',
      waiters: 0,
      held: 0,
    });
  });

  it('is down with store closed, not unreachable, once the service shuts down', async () => {
    app = await startHttpApp(
      {
        imports: [TerminusModule.forRoot({ logger: false }), lockModule(mongo)],
        controllers: [HealthController],
        providers: [MongoLockHealthIndicator],
      },
      'express',
    );
    await app.get(LockService).close();
    const response = await request(app.getHttpServer()).get('/health').expect(503);
    expect(response.body.error.locks).toMatchObject({
      status: 'down',
      store: 'closed',
      message: 'LockService is closed',
    });
  });

  it('reports leader or follower per leadership name', async () => {
    app = await startHttpApp(
      {
        imports: [TerminusModule.forRoot({ logger: false }), lockModule(mongo)],
        controllers: [HealthController],
        providers: [MongoLockHealthIndicator],
      },
      'express',
    );
    const locks = app.get(LockService);
    const term = await locks.leadership('health-leader').campaign();
    const other = await lockedElsewhere(locks.leadership('health-other'));
    const inLine = locks.leadership('health-other').campaign();
    const response = await request(app.getHttpServer()).get('/health').expect(200);
    expect(response.body.info.locks.leadership).toEqual({
      'health-leader': 'leader',
      'health-other': 'follower',
    });
    await term.resign();
    await other();
    await (await inLine).resign();
  });

  it('is down within its timeout when MongoDB is unreachable', async () => {
    app = await startHttpApp(
      {
        imports: [
          TerminusModule.forRoot({ logger: false }),
          // enabled: false: the app starts without MongoDB; the probe is the first use.
          MongoLockModule.forRoot({ uri: 'mongodb://127.0.0.1:9/', enabled: false }),
        ],
        controllers: [HealthController],
        providers: [MongoLockHealthIndicator],
      },
      'express',
    );
    const startedAt = Date.now();
    const response = await request(app.getHttpServer()).get('/health').expect(503);
    // The probe's 500 ms and an HTTP round trip, with slack for a loaded machine. Not bounded,
    // the probe waits for server selection (30 s).
    expect(Date.now() - startedAt).toBeLessThan(500 + 2 * LOAD_SLACK_MS);
    expect(response.body.error.locks).toMatchObject({ status: 'down', store: 'unreachable' });
  });
});
