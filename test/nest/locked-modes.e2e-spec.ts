import { Controller, Get, Injectable, Param } from '@nestjs/common';
import type { INestApplication, INestApplicationContext } from '@nestjs/common';
import request from 'supertest';
import { InvalidLockOptionsError, Locked, LockService, MongoLockError } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import {
  HTTP_ADAPTERS,
  gate,
  lockModule,
  startAppContext,
  startHttpApp,
} from './support/nest-apps';

jest.setTimeout(60_000);

@Injectable()
class Catalogue {
  readonly inside = { readers: 0, maxReaders: 0 };

  @Locked('catalogue:{args.0}', { mode: 'shared', timeoutMs: 10_000 })
  async read(_id: string, until: Promise<void>): Promise<string> {
    this.inside.readers += 1;
    this.inside.maxReaders = Math.max(this.inside.maxReaders, this.inside.readers);
    await until;
    this.inside.readers -= 1;
    return 'read';
  }

  @Locked('catalogue:{args.0}', { timeoutMs: 10_000 })
  async rewrite(_id: string): Promise<number> {
    return this.inside.readers;
  }

  @Locked('partner', { permits: 2, timeoutMs: 10_000 })
  async call(until: Promise<void>): Promise<void> {
    await until;
  }

  /** Re-entry: a shared section cannot become exclusive. */
  @Locked('catalogue:{args.0}', { mode: 'shared' })
  async upgrade(id: string): Promise<number> {
    return this.rewrite(id);
  }
}

@Controller('exports')
class ExportsController {
  @Get(':id')
  @Locked('exports', { permits: 1, timeoutMs: 0 })
  run(@Param('id') id: string) {
    return { id };
  }

  @Get('report/:id')
  @Locked('report:{params.id}', { mode: 'shared', timeoutMs: 0 })
  report(@Param('id') id: string) {
    return { id };
  }
}

describe('@Locked with lock modes on provider methods', () => {
  let mongo: TestMongo;
  let app: INestApplicationContext;
  let catalogue: Catalogue;
  let locks: LockService;

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startAppContext({ imports: [lockModule(mongo)], providers: [Catalogue] });
    catalogue = app.get(Catalogue);
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await mongo?.stop();
  });

  it('shared sections run together; the exclusive one waits until none is inside', async () => {
    const readers = gate();
    const r1 = catalogue.read('1', readers.opened);
    const r2 = catalogue.read('1', readers.opened);
    await until(() => catalogue.inside.maxReaders === 2);
    expect(catalogue.inside.maxReaders).toBe(2);
    const state = await locks.inspect('catalogue:1');
    expect(state?.mode).toBe('shared');
    expect(state?.holders).toHaveLength(2);
    const writer = catalogue.rewrite('1');
    await until(async () => (await locks.inspect('catalogue:1'))?.waiting === 1);
    expect((await locks.inspect('catalogue:1'))?.waiting).toBe(1);
    readers.open();
    await expect(Promise.all([r1, r2])).resolves.toEqual(['read', 'read']);
    await expect(writer).resolves.toBe(0);
  });

  it('a semaphore method admits at most its permits at once', async () => {
    const calls = gate();
    const running = [1, 2, 3].map(() => catalogue.call(calls.opened));
    // Until the third call waits (a fixed pause was too short on a loaded machine).
    await until(async () => (await locks.inspect('partner'))?.waiting === 1);
    const state = await locks.inspect('partner');
    expect(state).toMatchObject({ mode: 'semaphore', permits: 2, waiting: 1 });
    expect(state?.holders).toHaveLength(2);
    calls.open();
    await Promise.all(running);
    expect((await locks.inspect('partner'))?.held).toBe(false);
  });

  it('refuses to upgrade a shared section to exclusive when re-entered', async () => {
    await expect(catalogue.upgrade('2')).rejects.toBeInstanceOf(MongoLockError);
    expect((await locks.inspect('catalogue:2'))?.held).toBe(false);
  });

  it('rejects bad mode options when decorating', () => {
    const decorate = (options: object) => () => {
      class Bad {
        @Locked('x', options)
        async run() {}
      }
      return Bad;
    };
    expect(decorate({ mode: 'read' })).toThrow(InvalidLockOptionsError);
    expect(decorate({ permits: 0 })).toThrow(InvalidLockOptionsError);
    expect(decorate({ permits: 2, weight: 3 })).toThrow(InvalidLockOptionsError);
    expect(decorate({ weight: 1 })).toThrow(InvalidLockOptionsError);
    expect(decorate({ mode: 'shared', permits: 2 })).toThrow(InvalidLockOptionsError);
  });
});

describe.each(HTTP_ADAPTERS)('lock modes over HTTP (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let other: INestApplicationContext;
  let theirs: LockService;
  const server = () => app.getHttpServer() as Parameters<typeof request>[0];

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      {
        imports: [lockModule(mongo, { holderId: `app-${adapter}` })],
        controllers: [ExportsController],
      },
      adapter,
    );
    other = await startAppContext({ imports: [lockModule(mongo, { holderId: 'other' })] });
    theirs = other.get(LockService);
  });

  afterAll(async () => {
    await other?.close();
    await app?.close();
    await mongo?.stop();
  });

  it('answers 423 with Retry-After while the permits are taken, and 200 once one is free', async () => {
    const held = await theirs.acquire('exports', { permits: 1, ttlMs: 30_000 });
    const busy = await request(server()).get('/exports/1').expect(423);
    expect(Number(busy.headers['retry-after'])).toBeGreaterThanOrEqual(25);
    await held.release();
    await request(server()).get('/exports/1').expect(200, { id: '1' });
  });

  it('answers 423 with Retry-After to a shared request while a writer holds the key', async () => {
    const writer = await theirs.acquire('report:7', { ttlMs: 20_000 });
    const busy = await request(server()).get('/exports/report/7').expect(423);
    expect(Number(busy.headers['retry-after'])).toBeGreaterThanOrEqual(15);
    await writer.release();
    const reader = await theirs.acquire('report:7', { mode: 'shared' });
    await request(server()).get('/exports/report/7').expect(200, { id: '7' });
    await reader.release();
  });
});

/** Waits (up to 5 s) for `check`, for a state a loaded machine may reach late. */
async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let tries = 0; tries < 100 && !(await check()); tries++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
