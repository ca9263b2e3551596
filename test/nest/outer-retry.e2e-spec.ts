import {
  type CallHandler,
  Controller,
  Get,
  Header,
  HttpCode,
  type INestApplication,
  type INestApplicationContext,
  Injectable,
  type NestInterceptor,
  Param,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { MongoClient } from 'mongodb';
import { defer, from, retry, type Observable } from 'rxjs';
import request from 'supertest';
import {
  type DocumentLockHandle,
  type DocumentLocks,
  getDocumentLocksToken,
  InjectDocumentLocks,
  Locked,
  LockedDoc,
  LockedDocument,
  LockService,
  MongoLockModule,
  VersionETag,
} from '../../lib';
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

interface Account {
  _id: string;
  balance: number;
  version: number;
}

@Controller('retried')
@UseInterceptors(RetryOnce)
class RetriedController {
  constructor(@InjectDocumentLocks('accounts') private readonly accounts: DocumentLocks<Account>) {}

  @Get()
  @Locked('retried', { timeoutMs: 0 })
  get(): string {
    return 'done';
  }

  @Get('accounts/:id')
  @LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
  account(@LockedDoc() lock: DocumentLockHandle<Account>): number {
    return lock.doc.balance;
  }

  /** Refused while the document is locked: `@VersionETag`'s interceptor answers 423. */
  @Post('accounts/:id/deposit')
  @HttpCode(200)
  @VersionETag()
  deposit(@Param('id') id: string): Promise<Account> {
    return this.accounts.updateIfCurrent(id, 1, { $inc: { balance: 1 } });
  }

  /** The application's own `Retry-After`: kept. */
  @Post('accepted')
  @HttpCode(202)
  @Header('Retry-After', '5')
  @Locked('accepted', { timeoutMs: 0 })
  accepted(): string {
    return 'queued';
  }
}

describe.each(HTTP_ADAPTERS)('@Locked under an outer retry() (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let other: INestApplicationContext;
  let client: MongoClient;
  const server = () => app.getHttpServer() as Parameters<typeof request>[0];
  const accounts = () =>
    MongoLockModule.forFeature([
      { name: 'accounts', collection: 'accounts', version: { field: 'version' } },
    ]);

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      {
        imports: [lockModule(mongo, { isGlobal: true }), accounts()],
        controllers: [RetriedController],
        providers: [RetryOnce],
      },
      adapter,
    );
    other = await startAppContext({
      imports: [lockModule(mongo, { isGlobal: true, holderId: 'other' }), accounts()],
    });
    client = await MongoClient.connect(mongo.uri);
    await client
      .db(mongo.dbName)
      .collection<Account>('accounts')
      .insertOne({ _id: 'a', balance: 7, version: 1 });
  });

  afterAll(async () => {
    await client?.close();
    await other?.close();
    await app?.close();
    await mongo?.stop();
  });

  beforeEach(() => (RetryOnce.attempts = 0));

  it("answers the attempt that succeeded without the refused attempt's Retry-After", async () => {
    const held = await other.get(LockService).acquire('retried', { ttlMs: 30_000 });
    // The first attempt is refused (423, Retry-After: 30); the next takes the lock.
    RetryOnce.beforeRetry = () => held.release();

    const response = await request(server()).get('/retried').expect(200, 'done');

    expect(RetryOnce.attempts).toBe(2);
    expect(response.headers['retry-after']).toBeUndefined();
  });

  /** Holds document `a` elsewhere until the route's first attempt was refused. */
  async function documentHeldOnce(): Promise<void> {
    const theirs = other.get<DocumentLocks<Account>>(getDocumentLocksToken('accounts'));
    const held = await theirs.acquire('a', { ttlMs: 30_000 });
    RetryOnce.beforeRetry = () => held.release();
  }

  it('does the same for a document route', async () => {
    await documentHeldOnce();

    const response = await request(server()).get('/retried/accounts/a').expect(200, '7');

    expect(RetryOnce.attempts).toBe(2);
    expect(response.headers['retry-after']).toBeUndefined();
  });

  it('does the same for a write refused while the document is locked', async () => {
    await documentHeldOnce();

    const response = await request(server()).post('/retried/accounts/a/deposit').expect(200);

    expect(response.body).toMatchObject({ balance: 8, version: 2 });
    expect(RetryOnce.attempts).toBe(2);
    expect(response.headers['retry-after']).toBeUndefined();
  });

  it('keeps a Retry-After the application sets, also after a refused attempt', async () => {
    let response = await request(server()).post('/retried/accepted').expect(202, 'queued');
    expect(response.headers['retry-after']).toBe('5');

    const held = await other.get(LockService).acquire('accepted', { ttlMs: 30_000 });
    RetryOnce.beforeRetry = () => held.release();
    response = await request(server()).post('/retried/accepted').expect(202, 'queued');
    expect(RetryOnce.attempts).toBe(3);
    expect(response.headers['retry-after']).toBe('5');
  });
});
