import {
  Controller,
  Get,
  Injectable,
  type INestApplication,
  type INestApplicationContext,
  Param,
} from '@nestjs/common';
import { firstValueFrom, interval, map, Observable, take, toArray } from 'rxjs';
import request from 'supertest';
import { Locked, LockService, MongoLockModule } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import {
  gate,
  HTTP_ADAPTERS,
  lockModule,
  openLockCollection,
  startAppContext,
  startHttpApp,
} from './support/nest-apps';

jest.setTimeout(60_000);

@Injectable()
class DisabledJobs {
  static readonly holds = new Map<string, Promise<void>>();
  static running = 0;
  static maxRunning = 0;

  @Locked('disabled:{args.0}', { timeoutMs: 0 })
  async run(name: string): Promise<string | undefined> {
    DisabledJobs.running += 1;
    DisabledJobs.maxRunning = Math.max(DisabledJobs.maxRunning, DisabledJobs.running);
    try {
      await DisabledJobs.holds.get(name);
      return LockService.current()?.key ?? 'no lock';
    } finally {
      DisabledJobs.running -= 1;
    }
  }

  /** An argument that could not build a key: with locks off, no key is built. */
  @Locked('disabled:{args.0.id}')
  async byObject(_value: unknown): Promise<string> {
    return 'ran';
  }

  @Locked('disabled:ticks')
  ticks(): Observable<number> {
    return interval(5).pipe(take(3));
  }
}

@Controller('off')
class DisabledController {
  @Get(':id')
  @Locked('disabled-http:{params.id}', { timeoutMs: 0 })
  get(@Param('id') id: string) {
    return { id, key: LockService.current()?.key ?? null };
  }

  @Get('stream/:id')
  @Locked('disabled-http:stream')
  stream(): Observable<{ tick: number }> {
    return interval(5).pipe(
      take(2),
      map((tick) => ({ tick })),
    );
  }
}

describe('enabled: false turns @Locked into a pass-through', () => {
  let mongo: TestMongo;
  let collection: Awaited<ReturnType<typeof openLockCollection>>;

  beforeAll(async () => {
    mongo = await startTestMongo();
    collection = await openLockCollection(mongo);
  });

  afterAll(async () => {
    await collection?.close();
    await mongo?.stop();
  });

  describe('provider methods', () => {
    let app: INestApplicationContext;

    beforeAll(async () => {
      app = await startAppContext({
        imports: [lockModule(mongo, { enabled: false })],
        providers: [DisabledJobs],
      });
    });

    afterAll(async () => {
      await app?.close();
    });

    it('runs two calls on one key at the same time, with no lock and nothing written', async () => {
      const hold = gate();
      DisabledJobs.holds.set('same', hold.opened);
      DisabledJobs.maxRunning = 0;
      const jobs = app.get(DisabledJobs);
      const both = Promise.all([jobs.run('same'), jobs.run('same')]);
      hold.open();
      expect(await both).toEqual(['no lock', 'no lock']);
      expect(DisabledJobs.maxRunning).toBe(2);
      expect(await collection.locks.countDocuments({ _id: { $regex: '^disabled' } })).toBe(0);
    });

    it('builds no key: an argument that could not make one does not fail', async () => {
      await expect(app.get(DisabledJobs).byObject({ id: { $gt: '' } })).resolves.toBe('ran');
    });

    it('passes Observables through', async () => {
      const values = await firstValueFrom(app.get(DisabledJobs).ticks().pipe(toArray()));
      expect(values).toEqual([0, 1, 2]);
    });
  });

  it('needs no MongoDB: the application starts and the decorators work without one', async () => {
    // Nothing listens on port 9 (discard); a connection attempt would fail in 300 ms.
    const unreachable = 'mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=300&directConnection=true';
    const app = await startAppContext({
      imports: [MongoLockModule.forRoot({ uri: unreachable, enabled: false })],
      providers: [DisabledJobs],
    });
    try {
      await expect(app.get(DisabledJobs).run('offline')).resolves.toBe('no lock');
    } finally {
      await app.close();
    }
  });

  it('still locks when enabled is left out (the control)', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      providers: [DisabledJobs],
    });
    try {
      await expect(app.get(DisabledJobs).run('control')).resolves.toBe('disabled:control');
    } finally {
      await app.close();
    }
  });

  describe.each(HTTP_ADAPTERS)('handlers over HTTP (%s)', (adapter) => {
    let app: INestApplication;
    let other: INestApplicationContext;

    beforeAll(async () => {
      app = await startHttpApp(
        {
          imports: [lockModule(mongo, { enabled: false, holderId: `off-${adapter}` })],
          controllers: [DisabledController],
        },
        adapter,
      );
      other = await startAppContext({ imports: [lockModule(mongo, { holderId: 'other' })] });
    });

    afterAll(async () => {
      await other?.close();
      await app?.close();
    });

    it('runs the handler without a lock, even while another instance holds the key', async () => {
      const held = await other.get(LockService).acquire('disabled-http:1', { ttlMs: 30_000 });
      try {
        const server = app.getHttpServer() as Parameters<typeof request>[0];
        await request(server).get('/off/1').expect(200, { id: '1', key: null });
      } finally {
        await held.release();
      }
      expect(await collection.locks.countDocuments({ 'line.h': `off-${adapter}` })).toBe(0);
    });

    it('called outside its route, a handler returns a Promise, as a locked call does', async () => {
      const called = app.get(DisabledController).get('2') as unknown;
      expect(called).toBeInstanceOf(Promise);
      await expect(called).resolves.toEqual({ id: '2', key: null });
    });

    it('passes an Observable handler through', async () => {
      const server = app.getHttpServer() as Parameters<typeof request>[0];
      const response = await request(server).get('/off/stream/1').expect(200);
      expect(response.body).toEqual({ tick: 1 });
    });
  });
});
