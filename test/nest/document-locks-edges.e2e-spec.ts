import {
  ConflictException,
  Controller,
  type ExecutionContext,
  Get,
  GoneException,
  HttpCode,
  HttpException,
  type INestApplication,
  type INestApplicationContext,
  Injectable,
  Param,
  Post,
} from '@nestjs/common';
import { type Collection, type Document, MongoClient, ObjectId } from 'mongodb';
// Observable is imported as a value: the declared return type must be emitted as metadata.
import { defer, firstValueFrom, from, interval, map, Observable, take, toArray } from 'rxjs';
import request from 'supertest';
import {
  createLockedDocumentDecorator,
  type DocumentLockHandle,
  DocumentLocks,
  DocumentNotFoundError,
  getDocumentLocksToken,
  InjectDocumentLocks,
  LockedDoc,
  LockedDocument,
  LockedInterceptor,
  type LockedMetadata,
  LockNotAcquiredError,
  LockService,
  MongoLockModule,
} from '../../lib';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { startTestMongo, type TestMongo } from '../support/mongo';
import {
  eventually,
  gate,
  HTTP_ADAPTERS,
  lockModule,
  startAppContext,
  startHttpApp,
} from './support/nest-apps';

jest.setTimeout(60_000);

interface Account extends Document {
  _id: string;
  balance: number;
  version: number;
  tenant?: string;
}

/** A document's lock field on engine v2 (the default): its line of entries, by holder id. */
interface StoredLock {
  line?: { h: string }[];
}

const features = () =>
  MongoLockModule.forFeature([
    { name: 'accounts', collection: 'accounts', version: { field: 'version' } },
    { name: 'orders', collection: 'orders', idType: 'objectId' },
  ]);

/** Provider methods under document locks, called outside any request. */
@Injectable()
class Ledger {
  static calls = 0;
  static readonly holds = new Map<string, Promise<void>>();

  constructor(@InjectDocumentLocks('accounts') readonly accounts: DocumentLocks<Account>) {}

  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0 })
  async peek(
    _id: string,
    @LockedDoc() lock?: DocumentLockHandle<Account>,
  ): Promise<{ handle: DocumentLockHandle<Account> | undefined; balance?: number }> {
    Ledger.calls += 1;
    await Ledger.holds.get(_id);
    return { handle: lock, balance: lock?.doc.balance };
  }

  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0, where: { tenant: 't1' } })
  async tenantOne(_id: string): Promise<string> {
    Ledger.calls += 1;
    return 'ran';
  }

  @LockedDocument('accounts', '{args.0}', { onBusy: 'skip' })
  async skipWhenBusy(_id: string, @LockedDoc() lock?: DocumentLockHandle<Account>) {
    Ledger.calls += 1;
    return { balance: lock?.doc.balance };
  }

  /** Its body meets a busy lock of its own: that error is not a skip. */
  @LockedDocument('accounts', '{args.0}', { onBusy: 'skip' })
  async skipButBodyBusy(_id: string, busyId: string): Promise<string> {
    Ledger.calls += 1;
    await this.accounts.acquire(busyId, { timeoutMs: 0 });
    return 'acquired';
  }

  /** Emits three values while holding the document, reading the handle's document. */
  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0 })
  ticks(
    _id: string,
    @LockedDoc() lock?: DocumentLockHandle<Account>,
  ): Observable<{ tick: number; balance: number; fence: string }> {
    Ledger.calls += 1;
    return interval(30).pipe(
      take(3),
      map((tick) => ({ tick, balance: lock!.doc.balance, fence: lock!.fence.toString() })),
    );
  }

  /** Never completes by itself: only the subscriber's unsubscription ends it. */
  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0 })
  forever(_id: string): Observable<number> {
    return interval(10);
  }

  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0 })
  commitStream(_id: string, @LockedDoc() lock?: DocumentLockHandle<Account>): Observable<Account> {
    return defer(() => from(lock!.commit({ $inc: { balance: -1 } })));
  }

  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0 })
  failingStream(_id: string): Observable<never> {
    return defer(() => {
      throw new RangeError('stream failed');
    });
  }
}

/** Called from handlers that already lock a document. */
@Injectable()
class AccountOps {
  constructor(@InjectDocumentLocks('accounts') readonly accounts: DocumentLocks<Account>) {}

  /** A bounded wait: a deadlock on the outer lock fails in 2 s rather than hang. */
  @LockedDocument('accounts', '{args.0}', { timeoutMs: 2_000 })
  async bump(_id: string, @LockedDoc() lock?: DocumentLockHandle<Account>) {
    const written = await lock!.update({ $inc: { balance: 1 } });
    return { handle: lock, balance: written.balance };
  }

  @LockedDocument('accounts', '{args.0}', { timeoutMs: 2_000 })
  async pair(id: string, outerId: string, @LockedDoc() lock?: DocumentLockHandle<Account>) {
    const [inner, outer] = await Promise.all([
      this.accounts.inspect(id),
      this.accounts.inspect(outerId),
    ]);
    return { handle: lock, innerHeld: inner?.held, outerHeld: outer?.held, docId: lock?.doc._id };
  }
}

@Controller('accounts')
class NestedController {
  constructor(
    @InjectDocumentLocks('accounts') private readonly accounts: DocumentLocks<Account>,
    private readonly ops: AccountOps,
  ) {}

  @Post(':id/nested')
  @HttpCode(200)
  @LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
  async nested(@Param('id') id: string, @LockedDoc() lock: DocumentLockHandle<Account>) {
    const inner = await this.ops.bump(id);
    const state = await this.accounts.inspect(id);
    const written = await lock.commit({ $inc: { balance: 10 } });
    return {
      same: inner.handle === lock,
      innerBalance: inner.balance,
      heldAfterInner: state?.held,
      fenceAfterInner: state?.fence.toString(),
      fence: lock.fence.toString(),
      balance: written.balance,
      version: written.version,
    };
  }

  @Post(':id/pair/:other')
  @HttpCode(200)
  @LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
  async pair(
    @Param('id') id: string,
    @Param('other') other: string,
    @LockedDoc() lock: DocumentLockHandle<Account>,
  ) {
    const inner = await this.ops.pair(other, id);
    const outerAfter = await this.accounts.inspect(id);
    return {
      innerHeld: inner.innerHeld,
      outerHeld: inner.outerHeld,
      outerHeldAfter: outerAfter?.held,
      innerDoc: inner.docId,
      outerDoc: lock.doc._id,
      distinct: inner.handle !== undefined && inner.handle !== lock,
    };
  }
}

@Controller('orders')
class OrdersController {
  @Get(':id')
  @LockedDocument('orders', '{params.id}', { timeoutMs: 0 })
  read(@LockedDoc() lock: DocumentLockHandle) {
    return { id: String(lock.doc._id) };
  }
}

/** Overrides the hooks: a missing document is 410, a busy one 409, a skip says so. */
@Injectable()
class GoneLockedInterceptor extends LockedInterceptor {
  protected override mapLockError(error: unknown, context: ExecutionContext): unknown {
    if (error instanceof DocumentNotFoundError) return new GoneException('no such account');
    if (error instanceof LockNotAcquiredError) return new ConflictException('account busy');
    return super.mapLockError(error, context);
  }

  protected override skippedResult(_context: ExecutionContext, metadata: LockedMetadata): unknown {
    return { skipped: true, by: metadata.methodName };
  }
}

const GoneLockedDocument = createLockedDocumentDecorator(GoneLockedInterceptor);

@Controller('custom')
class CustomController {
  @Get('accounts/:id')
  @GoneLockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
  read(@LockedDoc() lock: DocumentLockHandle<Account>) {
    return { balance: lock.doc.balance, key: lock.key };
  }

  @Post('accounts/:id/skip')
  @HttpCode(200)
  @GoneLockedDocument('accounts', '{params.id}', { onBusy: 'skip' })
  skip(@LockedDoc() lock: DocumentLockHandle<Account>) {
    return { ran: true, balance: lock.doc.balance };
  }

  @Get('orders/:id')
  @GoneLockedDocument('orders', '{params.id}', { timeoutMs: 0 })
  order(@LockedDoc() lock: DocumentLockHandle) {
    return { id: String(lock.doc._id) };
  }
}

/** With `enabled: false`. */
@Injectable()
class OffLedger {
  static readonly holds = new Map<string, Promise<void>>();
  static running = 0;
  static maxRunning = 0;

  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0 })
  async peek(_id: unknown, @LockedDoc() lock?: DocumentLockHandle<Account>) {
    OffLedger.running += 1;
    OffLedger.maxRunning = Math.max(OffLedger.maxRunning, OffLedger.running);
    try {
      await OffLedger.holds.get(String(_id));
      return { lock: lock === undefined ? 'none' : 'given', current: LockService.current() };
    } finally {
      OffLedger.running -= 1;
    }
  }

  @LockedDocument('orders', '{args.0}', { timeoutMs: 0 })
  ticks(_id: string, @LockedDoc() lock?: DocumentLockHandle): Observable<string> {
    return interval(5).pipe(
      take(2),
      map(() => (lock === undefined ? 'none' : 'given')),
    );
  }
}

@Controller('off')
class OffController {
  @Get('accounts/:id')
  @LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
  read(@Param('id') id: string, @LockedDoc() lock: DocumentLockHandle<Account> | undefined) {
    return { id, lock: lock === undefined ? 'none' : 'given' };
  }

  @Get('orders/:id')
  @LockedDocument('orders', '{params.id}', { timeoutMs: 0 })
  order(@Param('id') id: string, @LockedDoc() lock: DocumentLockHandle | undefined) {
    return { id, lock: lock === undefined ? 'none' : 'given' };
  }
}

describe('@LockedDocument edge cases', () => {
  let mongo: TestMongo;
  let client: MongoClient;
  let accounts: Collection<Account>;
  let other: INestApplicationContext;
  let theirs: DocumentLocks<Account>;
  let theirOrders: DocumentLocks;

  const lockOf = async (id: string): Promise<StoredLock | undefined> =>
    ((await accounts.findOne({ _id: id })) as { _lock?: StoredLock } | null)?._lock;
  /** Who is in the document's line: nobody but `other` ever joined it in these tests. */
  const inLine = async (id: string) => (await lockOf(id))?.line?.map((entry) => entry.h);

  beforeAll(async () => {
    mongo = await startTestMongo();
    client = await MongoClient.connect(mongo.uri);
    accounts = client.db(mongo.dbName).collection<Account>('accounts');
    other = await startAppContext({
      imports: [lockModule(mongo, { isGlobal: true, holderId: 'other' }), features()],
    });
    theirs = other.get<DocumentLocks<Account>>(getDocumentLocksToken('accounts'));
    theirOrders = other.get<DocumentLocks>(getDocumentLocksToken('orders'));
  });

  beforeEach(async () => {
    Ledger.calls = 0;
    Ledger.holds.clear();
    OffLedger.holds.clear();
    await accounts.deleteMany({});
    await accounts.insertMany([
      { _id: 'a', balance: 100, version: 1, tenant: 't1' },
      { _id: 'b', balance: 50, version: 1, tenant: 't2' },
    ]);
  });

  afterAll(async () => {
    await other?.close();
    await client?.close();
    await mongo?.stop();
  });

  describe("with the module's enabled: false", () => {
    let app: INestApplicationContext;

    beforeAll(async () => {
      app = await startAppContext({
        imports: [
          lockModule(mongo, { isGlobal: true, enabled: false, holderId: 'off' }),
          features(),
        ],
        providers: [OffLedger],
      });
    });

    afterAll(async () => {
      await app?.close();
    });

    it('runs a provider method without a lock: @LockedDoc() is undefined, nothing written', async () => {
      await expect(app.get(OffLedger).peek('a')).resolves.toEqual({
        lock: 'none',
        current: undefined,
      });
      expect(await lockOf('a')).toBeUndefined();
      expect(await accounts.findOne({ _id: 'a' })).toEqual({
        _id: 'a',
        balance: 100,
        version: 1,
        tenant: 't1',
      });
    });

    it('runs while another instance holds the document, twice at once, and for a missing one', async () => {
      const held = await theirs.acquire('a', { ttlMs: 30_000 });
      const hold = gate();
      OffLedger.holds.set('a', hold.opened);
      OffLedger.maxRunning = 0;
      try {
        const ledger = app.get(OffLedger);
        const both = Promise.all([ledger.peek('a'), ledger.peek('a')]);
        await eventually(() => OffLedger.running === 2);
        hold.open();
        expect((await both).map((result) => result.lock)).toEqual(['none', 'none']);
        expect(OffLedger.maxRunning).toBe(2);
      } finally {
        await held.release();
      }
      // No document is read: a missing one is no DocumentNotFoundError.
      await expect(app.get(OffLedger).peek('missing')).resolves.toMatchObject({ lock: 'none' });
      expect(await accounts.findOne({ _id: 'missing' })).toBeNull();
    });

    it('builds no id: one that could not be an id does not fail', async () => {
      await expect(app.get(OffLedger).peek({ $gt: '' })).resolves.toMatchObject({
        lock: 'none',
      });
    });

    it('passes an Observable through, with @LockedDoc() undefined', async () => {
      const values = await firstValueFrom(app.get(OffLedger).ticks('not-an-id').pipe(toArray()));
      expect(values).toEqual(['none', 'none']);
    });

    // Documented on @LockedDoc(): the argument the caller passes there is replaced, and it is
    // `undefined` when the call is not under a document lock (e.g. with enabled: false).
    it('gives undefined to @LockedDoc() even when the caller passes something there', async () => {
      const stale = { doc: { _id: 'a' } } as unknown as DocumentLockHandle<Account>;
      await expect(app.get(OffLedger).peek('a', stale)).resolves.toMatchObject({ lock: 'none' });
    });

    describe.each(HTTP_ADAPTERS)('handlers over HTTP (%s)', (adapter) => {
      let http: INestApplication;
      const server = () => http.getHttpServer() as Parameters<typeof request>[0];

      beforeAll(async () => {
        http = await startHttpApp(
          {
            imports: [
              lockModule(mongo, { isGlobal: true, enabled: false, holderId: `off-${adapter}` }),
              features(),
            ],
            controllers: [OffController],
          },
          adapter,
        );
      });

      afterAll(async () => {
        await http?.close();
      });

      it('runs the handler without a lock, @LockedDoc() undefined, even while the document is held', async () => {
        const held = await theirs.acquire('a', { ttlMs: 30_000 });
        try {
          await request(server()).get('/off/accounts/a').expect(200, { id: 'a', lock: 'none' });
        } finally {
          await held.release();
        }
        expect(await inLine('a')).toEqual([]);
      });

      it('answers neither 404 for a missing document nor 400 for an id that is no ObjectId', async () => {
        await request(server())
          .get('/off/accounts/missing')
          .expect(200, { id: 'missing', lock: 'none' });
        await request(server())
          .get('/off/orders/not-an-object-id')
          .expect(200, { id: 'not-an-object-id', lock: 'none' });
        expect(await accounts.countDocuments({})).toBe(2);
      });
    });
  });

  describe('provider methods, outside HTTP', () => {
    let app: INestApplicationContext;
    let ledger: Ledger;

    beforeAll(async () => {
      app = await startAppContext({
        imports: [lockModule(mongo, { isGlobal: true, holderId: 'ledger' }), features()],
        providers: [Ledger],
      });
      ledger = app.get(Ledger);
    });

    afterAll(async () => {
      await app?.close();
    });

    it('rejects with DocumentNotFoundError as it is, without running, for a missing document or where not met', async () => {
      const missing = await ledger.peek('missing').catch((error: unknown) => error);
      expect(missing).toBeInstanceOf(DocumentNotFoundError);
      expect(missing).not.toBeInstanceOf(HttpException);
      const filtered = await ledger.tenantOne('b').catch((error: unknown) => error);
      expect(filtered).toBeInstanceOf(DocumentNotFoundError);
      expect(Ledger.calls).toBe(0);
      await expect(ledger.tenantOne('a')).resolves.toBe('ran');
      expect(await accounts.findOne({ _id: 'missing' })).toBeNull();
      expect(await lockOf('b')).toBeUndefined();
    });

    it('rejects at once with LockNotAcquiredError as it is (timeoutMs 0), without running', async () => {
      const held = await theirs.acquire('a', { ttlMs: 30_000 });
      try {
        const started = performance.now();
        const error = await ledger.peek('a').catch((caught: unknown) => caught);
        // A call that waited would run to the 10 s default timeout.
        expect(performance.now() - started).toBeLessThan(2 * LOAD_SLACK_MS);
        expect(error).toBeInstanceOf(LockNotAcquiredError);
        expect(error).not.toBeInstanceOf(HttpException);
        expect((error as LockNotAcquiredError).holderId).toBe('other');
        expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(20_000);
      } finally {
        await held.release();
      }
      expect(Ledger.calls).toBe(0);
      expect(await inLine('a')).toEqual([]);
    });

    it("resolves undefined without running with onBusy 'skip', and runs once free", async () => {
      const held = await theirs.acquire('a', { ttlMs: 30_000 });
      try {
        await expect(ledger.skipWhenBusy('a')).resolves.toBeUndefined();
        expect(Ledger.calls).toBe(0);
        expect(await inLine('a')).toEqual(['other']);
      } finally {
        await held.release();
      }
      await expect(ledger.skipWhenBusy('a')).resolves.toEqual({ balance: 100 });
      expect(Ledger.calls).toBe(1);
    });

    it("does not skip with onBusy 'skip' what is not a busy document: missing, or the body's own error", async () => {
      await expect(ledger.skipWhenBusy('missing')).rejects.toBeInstanceOf(DocumentNotFoundError);
      const held = await theirs.acquire('b', { ttlMs: 30_000 });
      try {
        await expect(ledger.skipButBodyBusy('a', 'b')).rejects.toBeInstanceOf(LockNotAcquiredError);
        expect(Ledger.calls).toBe(1);
      } finally {
        await held.release();
      }
      expect((await theirs.inspect('a'))?.held).toBe(false);
    });

    describe('declared to return an Observable', () => {
      it('holds the document until the Observable completes, and gives @LockedDoc() the handle', async () => {
        const values = firstValueFrom(ledger.ticks('a').pipe(toArray()));
        await eventually(async () => (await theirs.inspect('a'))?.held === true);
        expect((await theirs.inspect('a'))?.holderId).toBe('ledger');
        expect(await theirs.tryAcquire('a')).toBeNull();
        const emitted = await values;
        expect(emitted.map(({ tick, balance }) => ({ tick, balance }))).toEqual([
          { tick: 0, balance: 100 },
          { tick: 1, balance: 100 },
          { tick: 2, balance: 100 },
        ]);
        expect(new Set(emitted.map(({ fence }) => fence)).size).toBe(1);
        // Completion is delivered after the release.
        expect((await theirs.inspect('a'))?.held).toBe(false);
        expect(Ledger.calls).toBe(1);
      });

      it('releases when the subscriber unsubscribes', async () => {
        await expect(firstValueFrom(ledger.forever('a'))).resolves.toBe(0);
        await eventually(async () => (await theirs.inspect('a'))?.held === false);
        const again = await theirs.tryAcquire('a');
        expect(again).not.toBeNull();
        await again!.release();
      });

      it('commits inside the Observable, with nothing more to release', async () => {
        const written = await firstValueFrom(ledger.commitStream('a'));
        expect(written).toMatchObject({ balance: 99, version: 2 });
        expect((await theirs.inspect('a'))?.held).toBe(false);
        expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 99, version: 2 });
      });

      it("passes the Observable's error unchanged and releases", async () => {
        await expect(firstValueFrom(ledger.failingStream('a'))).rejects.toThrow(RangeError);
        expect((await theirs.inspect('a'))?.held).toBe(false);
      });

      it('errors with LockNotAcquiredError, without subscribing to the source, while held', async () => {
        const held = await theirs.acquire('a', { ttlMs: 30_000 });
        try {
          await expect(firstValueFrom(ledger.ticks('a'))).rejects.toBeInstanceOf(
            LockNotAcquiredError,
          );
          expect(Ledger.calls).toBe(0);
        } finally {
          await held.release();
        }
      });
    });
  });

  describe.each(HTTP_ADAPTERS)('handlers over HTTP (%s)', (adapter) => {
    let app: INestApplication;
    const server = () => app.getHttpServer() as Parameters<typeof request>[0];
    const orders = () => client.db(mongo.dbName).collection('orders');

    beforeAll(async () => {
      app = await startHttpApp(
        {
          imports: [lockModule(mongo, { isGlobal: true, holderId: `http-${adapter}` }), features()],
          controllers: [NestedController, OrdersController, CustomController],
          providers: [AccountOps],
        },
        adapter,
      );
    });

    afterAll(async () => {
      await app?.close();
    });

    describe('a handler calling a @LockedDocument provider method', () => {
      it('re-enters on the same document: the provider gets the same handle and the lock stays held', async () => {
        const response = await request(server()).post('/accounts/a/nested').expect(200);
        expect(response.body).toEqual({
          same: true,
          innerBalance: 101,
          heldAfterInner: true,
          fenceAfterInner: response.body.fence,
          fence: expect.stringMatching(/^\d+$/),
          balance: 111,
          version: 3,
        });
        expect((await theirs.inspect('a'))?.held).toBe(false);
        expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 111, version: 3 });
      });

      it('holds both documents when the provider locks another one', async () => {
        const response = await request(server()).post('/accounts/a/pair/b').expect(200);
        expect(response.body).toEqual({
          innerHeld: true,
          outerHeld: true,
          outerHeldAfter: true,
          innerDoc: 'b',
          outerDoc: 'a',
          distinct: true,
        });
        expect((await theirs.inspect('a'))?.held).toBe(false);
        expect((await theirs.inspect('b'))?.held).toBe(false);
      });
    });

    describe("a collection with idType 'objectId'", () => {
      it.each([
        ['not hexadecimal', 'zzzzzzzzzzzzzzzzzzzzzzzz'],
        ['23 digits', 'a'.repeat(23)],
        ['25 digits', 'a'.repeat(25)],
        ['a word', 'not-an-object-id'],
      ])('answers 400 for a route id that is %s, and writes nothing', async (_what, id) => {
        const response = await request(server()).get(`/orders/${id}`).expect(400);
        expect(response.body).toEqual({
          statusCode: 400,
          message: expect.stringMatching(/ObjectId/),
          error: 'Bad Request',
        });
        expect(await orders().countDocuments({})).toBe(0);
      });

      it('answers 404 for a valid ObjectId of a missing document, and creates none', async () => {
        const id = new ObjectId();
        const response = await request(server()).get(`/orders/${id.toHexString()}`).expect(404);
        expect(response.body).toEqual({
          statusCode: 404,
          message: expect.any(String),
          error: 'Not Found',
        });
        expect(await orders().findOne({ _id: id })).toBeNull();
        expect(await theirOrders.inspect(id)).toBeNull();
      });
    });

    describe('createLockedDocumentDecorator with a LockedInterceptor subclass', () => {
      it('locks and gives the handle to the handler', async () => {
        const response = await request(server()).get('/custom/accounts/a').expect(200);
        expect(response.body).toEqual({ balance: 100, key: expect.any(String) });
        expect((await theirs.inspect('a'))?.held).toBe(false);
      });

      it("uses the subclass's mapLockError: 410 for a missing document, 409 while held", async () => {
        const missing = await request(server()).get('/custom/accounts/missing').expect(410);
        expect(missing.body).toMatchObject({ statusCode: 410, message: 'no such account' });
        const held = await theirs.acquire('a', { ttlMs: 30_000 });
        try {
          const busy = await request(server()).get('/custom/accounts/a').expect(409);
          expect(busy.body).toMatchObject({ statusCode: 409, message: 'account busy' });
        } finally {
          await held.release();
        }
      });

      it('falls back to the base mapping for what it does not override (400 for a bad id)', async () => {
        const response = await request(server()).get('/custom/orders/nope').expect(400);
        expect(response.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
      });

      it("uses the subclass's skippedResult with onBusy 'skip'", async () => {
        const held = await theirs.acquire('a', { ttlMs: 30_000 });
        try {
          const skipped = await request(server()).post('/custom/accounts/a/skip').expect(200);
          expect(skipped.body).toEqual({ skipped: true, by: 'skip' });
        } finally {
          await held.release();
        }
        const ran = await request(server()).post('/custom/accounts/a/skip').expect(200);
        expect(ran.body).toEqual({ ran: true, balance: 100 });
      });
    });
  });
});
