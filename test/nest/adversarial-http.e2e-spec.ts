import {
  Controller,
  Get,
  HttpCode,
  HttpException,
  type INestApplication,
  type INestApplicationContext,
  Param,
  Patch,
  Post,
  Query,
} from '@nestjs/common';
import { type Collection, Decimal128, type Document, MongoClient } from 'mongodb';
import { of } from 'rxjs';
import request from 'supertest';
import {
  type DocumentLockHandle,
  DocumentLocks,
  getDocumentLocksToken,
  IfMatch,
  InjectDocumentLocks,
  LockedDoc,
  LockedDocument,
  MongoLockModule,
  VersionETag,
} from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { HTTP_ADAPTERS, lockModule, startAppContext, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

interface Item extends Document {
  _id: string;
  version: unknown;
  name?: string;
}

@Controller('adv')
class AdversarialController {
  constructor(
    @InjectDocumentLocks('ints') private readonly ints: DocumentLocks<Item>,
    @InjectDocumentLocks('decs') private readonly decs: DocumentLocks<Item>,
    @InjectDocumentLocks('dates') private readonly dates: DocumentLocks<Item>,
  ) {}

  @Patch('ints/:id')
  @VersionETag()
  renameInt(@Param('id') id: string, @IfMatch() version: string) {
    return this.ints.updateIfCurrent(id, version, { $set: { name: 'renamed' } });
  }

  @Patch('decs/:id')
  @VersionETag()
  renameDec(@Param('id') id: string, @IfMatch() version: string) {
    return this.decs.updateIfCurrent(id, version, { $set: { name: 'renamed' } });
  }

  @Patch('dates/:id')
  @VersionETag()
  renameDate(@Param('id') id: string, @IfMatch() version: string) {
    return this.dates.updateIfCurrent(id, version, { $set: { name: 'renamed' } });
  }

  @Get('ints/:id')
  @VersionETag()
  @LockedDocument('ints', '{params.id}', { timeoutMs: 0 })
  readInt(@LockedDoc() lock: DocumentLockHandle<Item>) {
    return lock.doc;
  }

  @Get('obs')
  @VersionETag()
  observable() {
    return of({ version: 7 });
  }

  @Get('by-query')
  @LockedDocument('ints', '{query.id}', { timeoutMs: 0 })
  byQuery(@LockedDoc() lock: DocumentLockHandle<Item>, @Query() _query: unknown) {
    return { id: lock.doc._id };
  }

  @Post('ints/:id/fail')
  @LockedDocument('ints', '{params.id}', { timeoutMs: 0 })
  fail(): never {
    throw new HttpException({ statusCode: 418, message: 'teapot', error: 'Teapot' }, 418);
  }

  @Post('ints/:id/skip')
  @HttpCode(200)
  @LockedDocument('ints', '{params.id}', { onBusy: 'skip' })
  skip(@LockedDoc() lock: DocumentLockHandle<Item>) {
    return lock.commit({ $set: { name: 'skipped-ran' } });
  }
}

describe.each(HTTP_ADAPTERS)('adversarial: document locks over HTTP (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let other: INestApplicationContext;
  let client: MongoClient;
  let ints: Collection<Item>;
  let decs: Collection<Item>;
  let dates: Collection<Item>;
  let theirs: DocumentLocks<Item>;
  const server = () => app.getHttpServer() as Parameters<typeof request>[0];
  const features = () =>
    MongoLockModule.forFeature([
      { name: 'ints', collection: 'ints', version: { field: 'version' } },
      { name: 'decs', collection: 'decs', version: { field: 'version', type: 'decimal128' } },
      { name: 'dates', collection: 'dates', version: { field: 'version', type: 'date' } },
    ]);

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      {
        imports: [lockModule(mongo, { isGlobal: true, holderId: `adv-${adapter}` }), features()],
        controllers: [AdversarialController],
      },
      adapter,
    );
    other = await startAppContext({
      imports: [lockModule(mongo, { isGlobal: true, holderId: 'secret-holder-id' }), features()],
    });
    theirs = other.get<DocumentLocks<Item>>(getDocumentLocksToken('ints'));
    client = await MongoClient.connect(mongo.uri);
    const db = client.db(mongo.dbName);
    ints = db.collection<Item>('ints');
    decs = db.collection<Item>('decs');
    dates = db.collection<Item>('dates');
  });

  beforeEach(async () => {
    await Promise.all([ints.deleteMany({}), decs.deleteMany({}), dates.deleteMany({})]);
  });

  afterAll(async () => {
    await client?.close();
    await other?.close();
    await app?.close();
    await mongo?.stop();
  });

  // ---- If-Match parsing ----

  it('If-Match "01" is not the ETag "1" (strong comparison): 412, nothing written', async () => {
    await ints.insertOne({ _id: 'a', version: 1 });
    await request(server()).patch('/adv/ints/a').set('If-Match', '"01"').expect(412);
    expect(await ints.findOne({ _id: 'a' })).toMatchObject({ version: 1 });
    expect((await ints.findOne({ _id: 'a' }))?.name).toBeUndefined();
  });

  it('a stale If-Match with leading zeros is 412, not 409', async () => {
    await ints.insertOne({ _id: 'a', version: 2 });
    await request(server()).patch('/adv/ints/a').set('If-Match', '"01"').expect(412);
  });

  it('a stale If-Match with a negative version is 412', async () => {
    await ints.insertOne({ _id: 'a', version: 2 });
    await request(server()).patch('/adv/ints/a').set('If-Match', '"-1"').expect(412);
  });

  it.each([
    ['weak', 'W/"1"', 400],
    ['list', '"1", "2"', 400],
    ['star', '*', 400],
    ['unquoted', '1', 400],
    ['decimal for an int version', '"1.5"', 400],
    ['non-numeric', '"abc"', 400],
    ['huge number', `"${'9'.repeat(40)}"`, 400],
    ['padded with spaces', '   "1"   ', 200],
  ])('If-Match %s (%s) → %d', async (_label, header, status) => {
    await ints.insertOne({ _id: 'a', version: 1 });
    const response = await request(server()).patch('/adv/ints/a').set('If-Match', header);
    expect(response.status).toBe(status);
    if (status >= 400) {
      expect(response.body).toEqual({
        statusCode: status,
        message: expect.any(String),
        error: 'Bad Request',
      });
      expect((await ints.findOne({ _id: 'a' }))?.name).toBeUndefined();
    }
  });

  it('missing If-Match is 428 with the standard body', async () => {
    await ints.insertOne({ _id: 'a', version: 1 });
    const response = await request(server()).patch('/adv/ints/a').expect(428);
    expect(response.body).toEqual({
      statusCode: 428,
      message: expect.any(String),
      error: 'Precondition Required',
    });
  });

  // ---- versions of other types ----

  it('decimal128 versions: ETag round trip, stale If-Match is 412', async () => {
    await decs.insertOne({ _id: 'd', version: Decimal128.fromString('1') });
    const first = await request(server()).patch('/adv/decs/d').set('If-Match', '"1"').expect(200);
    expect(first.headers.etag).toBe('"2"');
    await request(server()).patch('/adv/decs/d').set('If-Match', '"1"').expect(412);
    await request(server()).patch('/adv/decs/d').set('If-Match', first.headers.etag).expect(200);
  });

  it('date versions: ETag round trip, stale If-Match is 412', async () => {
    const start = new Date(Date.now() - 60_000);
    await dates.insertOne({ _id: 't', version: start });
    const first = await request(server())
      .patch('/adv/dates/t')
      .set('If-Match', `"${start.getTime()}"`)
      .expect(200);
    expect(Number(JSON.parse(first.headers.etag))).toBeGreaterThan(start.getTime());
    await request(server())
      .patch('/adv/dates/t')
      .set('If-Match', `"${start.getTime()}"`)
      .expect(412);
    await request(server()).patch('/adv/dates/t').set('If-Match', first.headers.etag).expect(200);
  });

  it('a date version before 1970 round-trips its ETag', async () => {
    const start = new Date(-86_400_000);
    await dates.insertOne({ _id: 'old', version: start });
    // The server gave this ETag: sending it back must be accepted as the current version.
    await request(server()).patch('/adv/dates/old').set('If-Match', '"-86400000"').expect(200);
  });

  it('decimal versions compare by value, as documented: "1.0" matches the ETag "1", "1.5" does not', async () => {
    await decs.insertOne({ _id: 'd', version: Decimal128.fromString('1') });
    await request(server()).patch('/adv/decs/d').set('If-Match', '"1.5"').expect(412);
    expect((await decs.findOne({ _id: 'd' }))?.name).toBeUndefined();
    await request(server()).patch('/adv/decs/d').set('If-Match', '"1.0"').expect(200);
  });

  it('an ISO date If-Match for a date version is not the ETag the server gave: 412 or 400, nothing written', async () => {
    const start = new Date(Date.UTC(2024, 0, 1));
    await dates.insertOne({ _id: 'iso', version: start });
    const response = await request(server())
      .patch('/adv/dates/iso')
      .set('If-Match', '"2024-01-01T00:00:00.000Z"');
    expect([400, 412]).toContain(response.status);
    expect((await dates.findOne({ _id: 'iso' }))?.name).toBeUndefined();
  });

  // ---- @VersionETag ----

  it('@VersionETag sets the ETag of an Observable result', async () => {
    const response = await request(server()).get('/adv/obs').expect(200);
    expect(response.headers.etag).toBe('"7"');
  });

  // ---- ids from templates ----

  it.each([
    ['percent', 'x%y', '/adv/ints/x%25y'],
    ['slash', 'a/b', '/adv/ints/a%2Fb'],
    ['unicode', 'é→😀', `/adv/ints/${encodeURIComponent('é→😀')}`],
    ['operator-looking', '{"$gt":""}', `/adv/ints/${encodeURIComponent('{"$gt":""}')}`],
    ['encoded-looking', '%41', '/adv/ints/%2541'],
  ])('locks the document whose _id is the %s param as is', async (_label, id, path) => {
    await ints.insertMany([
      { _id: id, version: 3 },
      { _id: 'zzz', version: 9 },
    ]);
    const response = await request(server()).get(path).expect(200);
    expect(response.body).toMatchObject({ _id: id, version: 3 });
    expect(response.headers.etag).toBe('"3"');
  });

  it('an operator object in the query never reaches the database as a filter', async () => {
    await ints.insertOne({ _id: 'a', version: 1 });
    const response = await request(server()).get('/adv/by-query?id[$gt]=');
    expect(response.status).toBe(400);
    const stored = await ints.findOne({ _id: 'a' });
    expect((stored as { _lock?: unknown })?._lock ?? null).toBeNull();
  });

  // ---- lock lifetime ----

  it('the lock is released when the handler throws an HttpException (status kept)', async () => {
    await ints.insertOne({ _id: 'a', version: 1 });
    const response = await request(server()).post('/adv/ints/a/fail').expect(418);
    expect(response.body).toMatchObject({ statusCode: 418, message: 'teapot' });
    expect((await theirs.inspect('a'))?.held).toBe(false);
  });

  it("onBusy: 'skip' on a held document: the handler does not run, nothing written", async () => {
    await ints.insertOne({ _id: 'a', version: 1 });
    const held = await theirs.acquire('a', { ttlMs: 30_000 });
    try {
      const response = await request(server()).post('/adv/ints/a/skip');
      expect(response.status).toBe(200);
      expect(response.text).toBe('');
    } finally {
      await held.release();
    }
    expect((await ints.findOne({ _id: 'a' }))?.name).toBeUndefined();
  });

  it('423 bodies and headers do not reveal the holder id', async () => {
    await ints.insertOne({ _id: 'a', version: 1 });
    const held = await theirs.acquire('a', { ttlMs: 30_000 });
    try {
      const locked = await request(server()).get('/adv/ints/a').expect(423);
      expect(JSON.stringify(locked.body) + JSON.stringify(locked.headers)).not.toContain(
        'secret-holder-id',
      );
      const patched = await request(server()).patch('/adv/ints/a').set('If-Match', '"1"');
      expect(patched.status).toBe(423);
      expect(JSON.stringify(patched.body) + JSON.stringify(patched.headers)).not.toContain(
        'secret-holder-id',
      );
    } finally {
      await held.release();
    }
  });
});
