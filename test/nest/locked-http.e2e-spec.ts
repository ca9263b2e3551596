import type { INestApplication, INestApplicationContext } from '@nestjs/common';
import request from 'supertest';
import { LockService } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import {
  FakeAuthGuard,
  LockedHttpController,
  PaymentsService,
  TimedLockedController,
  InnerTimeoutController,
} from './fixtures/locked-http.fixture';
import {
  eventually,
  gate,
  HTTP_ADAPTERS,
  lockModule,
  openLockCollection,
  startAppContext,
  startHttpApp,
} from './support/nest-apps';

jest.setTimeout(60_000);

describe.each(HTTP_ADAPTERS)('@Locked handlers over HTTP (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let other: INestApplicationContext;
  let locks: LockService;
  let otherLocks: LockService;
  let collection: Awaited<ReturnType<typeof openLockCollection>>;
  const server = () => app.getHttpServer() as Parameters<typeof request>[0];

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      {
        imports: [lockModule(mongo, { holderId: `app-${adapter}` })],
        controllers: [LockedHttpController, TimedLockedController, InnerTimeoutController],
        providers: [PaymentsService, FakeAuthGuard],
      },
      adapter,
    );
    // A second instance of the service, as another process would be.
    other = await startAppContext({ imports: [lockModule(mongo, { holderId: 'other' })] });
    locks = app.get(LockService);
    otherLocks = other.get(LockService);
    collection = await openLockCollection(mongo);
  });

  afterAll(async () => {
    await collection?.close();
    await other?.close();
    await app?.close();
    await mongo?.stop();
  });

  afterEach(() => jest.restoreAllMocks());

  it('answers 423 Locked with Retry-After when another holder has the key', async () => {
    const held = await otherLocks.acquire('order:1', { ttlMs: 30_000 });
    try {
      const response = await request(server()).post('/t/orders/1/pay').expect(423);
      const retryAfter = Number(response.headers['retry-after']);
      expect(Number.isInteger(retryAfter)).toBe(true);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(30);
      expect(response.body).toEqual({
        statusCode: 423,
        error: 'Locked',
        message: expect.stringContaining('locked') as unknown,
      });
      expect(JSON.stringify(response.body)).not.toContain('other');
    } finally {
      await held.release();
    }
  });

  it('holds the lock while the handler runs and releases it after success', async () => {
    const response = await request(server()).post('/t/orders/2/pay').expect(200);
    expect(response.body).toMatchObject({ key: 'order:2', heldDuringHandler: true });
    expect((await locks.inspect('order:2'))?.held).toBe(false);
  });

  it('makes a concurrent request on the same key wait no longer than timeoutMs: 423', async () => {
    const hold = gate();
    LockedHttpController.holds.set('3', hold.opened);
    try {
      const first = request(server())
        .post('/t/orders/3/pay')
        .then((r) => r);
      await eventually(async () => (await locks.inspect('order:3'))?.held === true);
      await request(server()).post('/t/orders/3/pay').expect(423);
      hold.open();
      expect((await first).status).toBe(200);
    } finally {
      hold.open();
      LockedHttpController.holds.delete('3');
    }
  });

  it('passes the handler’s HttpException through unchanged and releases the lock', async () => {
    const response = await request(server()).get('/t/fail/1').expect(418);
    expect(response.body).toEqual({ reason: 'teapot', custom: true });
    expect((await locks.inspect('fail:1'))?.held).toBe(false);
  });

  it('passes other handler errors through (500) and releases the lock', async () => {
    await request(server()).get('/t/crash/1').expect(500);
    expect((await locks.inspect('crash:1'))?.held).toBe(false);
  });

  it('fills templates from params, query, body, user and headers', async () => {
    const response = await request(server())
      .post('/t/sources/9?x=q1')
      .set('X-Tenant', 'acme')
      .send({ a: { b: 'deep' } })
      .expect(200);
    expect(response.body).toEqual({
      key: 'src:9:q1:deep:u-7:acme',
      current: 'src:9:q1:deep:u-7:acme',
    });
  });

  it('accepts a key function and takes several keys, all released after', async () => {
    const response = await request(server()).post('/t/by-function/4').expect(200);
    expect(response.body).toEqual({ keys: ['fn:4', 'fn:shared'] });
    expect((await locks.inspect('fn:4'))?.held).toBe(false);
    expect((await locks.inspect('fn:shared'))?.held).toBe(false);
  });

  it('takes several keys all or nothing: one held elsewhere means none is taken', async () => {
    const held = await otherLocks.acquire('fn:shared', { ttlMs: 30_000 });
    try {
      await request(server()).post('/t/by-function/8').expect(423);
      expect((await locks.inspect('fn:8'))?.held ?? false).toBe(false);
    } finally {
      await held.release();
    }
  });

  describe('hostile input', () => {
    const countHostile = async () =>
      (await collection.locks.find({ _id: { $regex: '^hostile:' } }).toArray()).length;

    it.each<[string, unknown]>([
      ['an operator object', { id: { $gt: '' } }],
      ['an $ne operator', { id: { $ne: null } }],
      ['an array', { id: ['a', 'b'] }],
      ['an empty object', { id: {} }],
      ['an empty string', { id: '' }],
      ['null', { id: null }],
      ['no field', {}],
      ['a huge value', { id: 'x'.repeat(600) }],
      ['a NUL character', { id: 'a\u0000b' }],
      ['a nested prototype path', { constructor: { prototype: { id: 'x' } } }],
    ])('refuses %s in the body with 400 and writes nothing', async (_label, body) => {
      const response = await request(server())
        .post('/t/hostile')
        .send(body as object)
        .expect(400);
      expect(response.body).toMatchObject({ statusCode: 400 });
      expect(await countHostile()).toBe(0);
    });

    it('refuses a __proto__ body with 400 and writes nothing', async () => {
      await request(server())
        .post('/t/hostile')
        .set('Content-Type', 'application/json')
        .send('{"__proto__":{"id":"polluted"}}')
        .expect(400);
      expect(await countHostile()).toBe(0);
      expect(({} as { id?: unknown }).id).toBeUndefined();
    });

    it.each([
      ['a repeated parameter', '?x=a&x=b'],
      ['an operator-like parameter', '?x[$gt]='],
      ['a missing parameter', '?y=1'],
      ['an empty parameter', '?x='],
      ['a NUL character', '?x=a%00b'],
      ['a huge parameter', `?x=${'y'.repeat(600)}`],
    ])('refuses %s in the query with 400 and writes nothing', async (_label, query) => {
      await request(server()).get(`/t/hostile${query}`).expect(400);
      expect(await countHostile()).toBe(0);
    });

    it('locks a well-formed value (the corpus would notice a write)', async () => {
      await request(server()).post('/t/hostile').send({ id: 'fine' }).expect(200);
      expect(await countHostile()).toBe(1);
    });
  });

  it('locks a handler exactly once per request', async () => {
    const withLock = jest.spyOn(locks, 'withLock');
    const seen: string[] = [];
    let streamOpen = false;
    const subscription = locks.events$.subscribe((event) => {
      if (event.key === 'order:5') seen.push(event.type);
      if (event.key === 'warm-up') streamOpen = true;
    });
    try {
      // Wait until the change stream delivers, so that no event of the request is missed.
      await eventually(async () => {
        await locks.withLock('warm-up', () => undefined);
        return streamOpen;
      });
      withLock.mockClear();
      await request(server()).post('/t/orders/5/pay').expect(200);
      expect(withLock).toHaveBeenCalledTimes(1);
      // The change stream delivers in order: every acquisition comes before the final release.
      await eventually(() => seen.includes('released'));
      expect(seen.filter((type) => type === 'acquired')).toHaveLength(1);
    } finally {
      subscription.unsubscribe();
    }
  });

  it('lets a @Locked provider method re-enter the handler’s lock on the same key', async () => {
    const response = await request(server()).post('/t/reenter/6').expect(200);
    expect(response.body).toEqual({ key: 'order:6' });
    expect((await locks.inspect('order:6'))?.held).toBe(false);
  });

  // As README and docs/http.md say: the route takes a handler's lock, not the method.
  it('refuses a @Locked handler keyed by the request called as a method; its provider method locks', async () => {
    const response = await request(server()).post('/t/batch/7').expect(200);
    const outsideRoute = (where: string) =>
      expect.stringMatching(
        new RegExp(
          `^LockedHttpController\\.${where} is @Locked with "order:\\{params\\.id\\}", .*called outside its route`,
        ),
      );
    expect(response.body).toEqual({
      handler: outsideRoute('shipKey'),
      syncHandler: outsideRoute('reenter'),
      provider: 'order:7',
    });
    expect((await locks.inspect('order:7'))?.held).toBe(false);
  });

  describe('under a request timeout', () => {
    let hold: ReturnType<typeof gate<void>>;
    beforeEach(() => {
      hold = gate();
      TimedLockedController.hold = hold.opened;
      TimedLockedController.started = 0;
      TimedLockedController.finished = 0;
    });
    afterEach(() => hold.open());

    it('keeps the lock until an async handler ends, when an outer interceptor stopped listening', async () => {
      // The timeout answers at 200 ms; the handler cannot be stopped and still runs.
      await request(server()).get('/timed/slow/1').expect(408);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(TimedLockedController.finished).toBe(0);
      expect((await locks.inspect('slow:1'))?.held).toBe(true);
      hold.open();
      await eventually(async () => (await locks.inspect('slow:1'))?.held === false);
      expect(TimedLockedController.finished).toBe(1);
    });

    it('never runs a handler whose request ended while an async pipe still ran', async () => {
      await request(server()).get('/timed/piped/1').expect(408);
      // The pipe ends at 400 ms; Nest would call the handler then, with the lock released.
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(TimedLockedController.started).toBe(0);
      expect((await locks.inspect('piped:1'))?.held).toBe(false);
    });

    it('keeps the lock until the handler ends when a timeout inside the lock fires', async () => {
      const answered = request(server())
        .get('/timed-inside/inner/1')
        .then((response) => response.status);
      await eventually(() => TimedLockedController.started === 1);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect((await locks.inspect('inner:1'))?.held).toBe(true);
      hold.open();
      expect(await answered).toBe(408);
      expect(TimedLockedController.finished).toBe(1);
      await eventually(async () => (await locks.inspect('inner:1'))?.held === false);
    });
  });

  it('holds the lock of an Observable handler until the client goes away', async () => {
    const address = await app.listen(0).then(() => app.getUrl());
    const controller = new AbortController();
    const response = await fetch(`${address.replace('[::1]', '127.0.0.1')}/t/stream/1`, {
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    await reader.read();
    expect((await locks.inspect('stream:1'))?.held).toBe(true);
    controller.abort();
    await reader.cancel().catch(() => undefined);
    await eventually(async () => (await locks.inspect('stream:1'))?.held === false);
  });
});
