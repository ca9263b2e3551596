import {
  Body,
  Controller,
  Get,
  HttpCode,
  type INestApplication,
  type INestApplicationContext,
  Param,
  Patch,
  Post,
} from '@nestjs/common';
import { type Collection, type Document, MongoClient, ObjectId } from 'mongodb';
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

interface Account extends Document {
  _id: string;
  balance: number;
  version: number;
  tenant?: string;
  name?: string;
}

@Controller('accounts')
class AccountsController {
  constructor(@InjectDocumentLocks('accounts') private readonly accounts: DocumentLocks<Account>) {}

  @Post(':id/withdraw')
  @HttpCode(200)
  @VersionETag()
  @LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
  withdraw(@Body() body: { amount: number }, @LockedDoc() lock: DocumentLockHandle<Account>) {
    return lock.commit({ $inc: { balance: -body.amount } });
  }

  @Get(':id')
  @VersionETag('version')
  @LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
  read(@LockedDoc() lock: DocumentLockHandle<Account>) {
    return lock.doc;
  }

  @Get(':id/tenant-one')
  @LockedDocument('accounts', '{params.id}', { timeoutMs: 0, where: { tenant: 't1' } })
  tenantOne(@LockedDoc() lock: DocumentLockHandle<Account>) {
    return { id: lock.doc._id };
  }

  @Post(':id/open')
  @HttpCode(200)
  @LockedDocument('accounts', '{params.id}', { createIfMissing: { balance: 0 } })
  open(@LockedDoc() lock: DocumentLockHandle<Account>) {
    return { created: lock.created, id: lock.doc._id };
  }

  @Patch(':id')
  @VersionETag()
  rename(
    @Param('id') id: string,
    @IfMatch() version: string,
    @Body() body: { name: string },
  ): Promise<Account> {
    return this.accounts.updateIfCurrent(id, version, { $set: { name: body.name } });
  }

  /** If-Match optional: without it, the version comes from the body (a conflict is then 409). */
  @Patch(':id/relaxed')
  @VersionETag()
  renameRelaxed(
    @Param('id') id: string,
    @IfMatch({ required: false }) version: string | undefined,
    @Body() body: { name: string; version?: number },
  ): Promise<Account> {
    return this.accounts.updateIfCurrent(id, version ?? body.version, {
      $set: { name: body.name },
    });
  }

  /** If-Match under a document lock: checked before the lock is taken. */
  @Patch(':id/locked')
  @VersionETag()
  @LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
  async renameLocked(
    @IfMatch() version: string,
    @Body() body: { name: string },
    @LockedDoc() lock: DocumentLockHandle<Account>,
  ) {
    if (String(lock.doc.version) !== version) return lock.doc;
    return lock.commit({ $set: { name: body.name } });
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

describe.each(HTTP_ADAPTERS)('document locks over HTTP (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let other: INestApplicationContext;
  let client: MongoClient;
  let accounts: Collection<Account>;
  let theirs: DocumentLocks<Account>;
  const server = () => app.getHttpServer() as Parameters<typeof request>[0];
  const features = () =>
    MongoLockModule.forFeature([
      { name: 'accounts', collection: 'accounts', version: { field: 'version' } },
      { name: 'orders', collection: 'orders', idType: 'objectId' },
    ]);

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      {
        imports: [lockModule(mongo, { isGlobal: true, holderId: `app-${adapter}` }), features()],
        controllers: [AccountsController, OrdersController],
      },
      adapter,
    );
    other = await startAppContext({
      imports: [lockModule(mongo, { isGlobal: true, holderId: 'other' }), features()],
    });
    theirs = other.get<DocumentLocks<Account>>(getDocumentLocksToken('accounts'));
    client = await MongoClient.connect(mongo.uri);
    accounts = client.db(mongo.dbName).collection<Account>('accounts');
  });

  beforeEach(async () => {
    await accounts.deleteMany({});
    await accounts.insertMany([
      { _id: 'a', balance: 100, version: 1, tenant: 't1' },
      { _id: 'b:2', balance: 5, version: 4, tenant: 't2' },
    ]);
  });

  afterAll(async () => {
    await client?.close();
    await other?.close();
    await app?.close();
    await mongo?.stop();
  });

  it('commits through @LockedDoc() and answers with the new version as a strong ETag', async () => {
    const response = await request(server())
      .post('/accounts/a/withdraw')
      .send({ amount: 30 })
      .expect(200);
    expect(response.body).toMatchObject({ _id: 'a', balance: 70, version: 2 });
    expect(response.headers.etag).toBe('"2"');
    const stored = await accounts.findOne({ _id: 'a' });
    expect(stored).toMatchObject({ balance: 70, version: 2 });
    expect((stored as { _lock?: { owner: unknown } })._lock?.owner ?? null).toBeNull();
  });

  it('locks the id a template renders as is (a ":" in it is not escaped)', async () => {
    const response = await request(server()).get('/accounts/b%3A2').expect(200);
    expect(response.body).toMatchObject({ _id: 'b:2', balance: 5 });
    expect(response.headers.etag).toBe('"4"');
    expect((await theirs.inspect('b:2'))?.held).toBe(false);
  });

  it('answers 423 Locked with Retry-After while another holder has the document', async () => {
    const held = await theirs.acquire('a', { ttlMs: 30_000 });
    try {
      const response = await request(server())
        .post('/accounts/a/withdraw')
        .send({ amount: 1 })
        .expect(423);
      expect(response.body).toEqual({
        statusCode: 423,
        message: expect.stringMatching(/locked/i),
        error: 'Locked',
      });
      expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(25);
    } finally {
      await held.release();
    }
    expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 100, version: 1 });
  });

  it('answers 423 with Retry-After when updateIfCurrent finds the document locked', async () => {
    const held = await theirs.acquire('a', { ttlMs: 30_000 });
    try {
      const response = await request(server())
        .patch('/accounts/a')
        .set('If-Match', '"1"')
        .send({ name: 'x' })
        .expect(423);
      expect(response.body).toMatchObject({ statusCode: 423, error: 'Locked' });
      expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(25);
    } finally {
      await held.release();
    }
    expect((await accounts.findOne({ _id: 'a' }))?.name).toBeUndefined();
  });

  it('answers 404 for a missing document and for one that does not meet where', async () => {
    const missing = await request(server()).get('/accounts/nope').expect(404);
    expect(missing.body).toEqual({
      statusCode: 404,
      message: expect.any(String),
      error: 'Not Found',
    });
    await request(server()).get('/accounts/a/tenant-one').expect(200);
    const filtered = await request(server()).get('/accounts/b%3A2/tenant-one').expect(404);
    expect(filtered.body).toMatchObject({ statusCode: 404, error: 'Not Found' });
    await request(server()).post('/accounts/nope/withdraw').send({ amount: 1 }).expect(404);
    expect(await accounts.findOne({ _id: 'nope' })).toBeNull();
  });

  it('creates a missing document with createIfMissing', async () => {
    const first = await request(server()).post('/accounts/fresh/open').expect(200);
    expect(first.body).toEqual({ created: true, id: 'fresh' });
    const second = await request(server()).post('/accounts/fresh/open').expect(200);
    expect(second.body).toEqual({ created: false, id: 'fresh' });
  });

  it('updates with the If-Match version, answers the new ETag, and 412 once it moved', async () => {
    const updated = await request(server())
      .patch('/accounts/a')
      .set('If-Match', '"1"')
      .send({ name: 'first' })
      .expect(200);
    expect(updated.body).toMatchObject({ name: 'first', version: 2 });
    expect(updated.headers.etag).toBe('"2"');

    const stale = await request(server())
      .patch('/accounts/a')
      .set('If-Match', '"1"')
      .send({ name: 'second' })
      .expect(412);
    expect(stale.body).toEqual({
      statusCode: 412,
      message: expect.stringMatching(/version is 2/),
      error: 'Precondition Failed',
    });
    expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ name: 'first', version: 2 });
  });

  it('answers 409 when the stale version came from elsewhere than If-Match', async () => {
    await accounts.updateOne({ _id: 'a' }, { $set: { version: 5 } });
    const response = await request(server())
      .patch('/accounts/a/relaxed')
      .send({ name: 'x', version: 1 })
      .expect(409);
    expect(response.body).toEqual({
      statusCode: 409,
      message: expect.stringMatching(/version is 5/),
      error: 'Conflict',
    });
    // With If-Match on the same route, the same conflict is 412.
    await request(server())
      .patch('/accounts/a/relaxed')
      .set('If-Match', '"1"')
      .send({ name: 'x' })
      .expect(412);
    await request(server())
      .patch('/accounts/a/relaxed')
      .set('If-Match', '"5"')
      .send({ name: 'y' })
      .expect(200);
    expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ name: 'y', version: 6 });
  });

  it('answers 428 without If-Match where it is required, before any lock is taken', async () => {
    const response = await request(server()).patch('/accounts/a').send({ name: 'x' }).expect(428);
    expect(response.body).toEqual({
      statusCode: 428,
      message: expect.stringMatching(/If-Match/),
      error: 'Precondition Required',
    });
    // Under @LockedDocument too, even while another holder has the document (no 423).
    const held = await theirs.acquire('a', { ttlMs: 30_000 });
    try {
      await request(server()).patch('/accounts/a/locked').send({ name: 'x' }).expect(428);
    } finally {
      await held.release();
    }
    const locked = await request(server())
      .patch('/accounts/a/locked')
      .set('If-Match', '"1"')
      .send({ name: 'z' })
      .expect(200);
    expect(locked.headers.etag).toBe('"2"');
    expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ name: 'z', version: 2 });
  });

  it.each([
    ['a weak ETag', 'W/"1"'],
    ['an unquoted version', '1'],
    ['a list', '"1", "2"'],
    ['a wildcard', '*'],
  ])('answers 400 for %s in If-Match', async (_what, header) => {
    const response = await request(server())
      .patch('/accounts/a')
      .set('If-Match', header)
      .send({ name: 'x' })
      .expect(400);
    expect(response.body).toEqual({
      statusCode: 400,
      message: expect.stringMatching(/strong ETag/),
      error: 'Bad Request',
    });
    expect((await accounts.findOne({ _id: 'a' }))?.name).toBeUndefined();
  });

  it('answers 400 for a version that is not one of the collection (InvalidLockOptionsError)', async () => {
    const response = await request(server())
      .patch('/accounts/a')
      .set('If-Match', '"abc"')
      .send({ name: 'x' })
      .expect(400);
    expect(response.body).toEqual({
      statusCode: 400,
      message: expect.stringMatching(/expectedVersion/),
      error: 'Bad Request',
    });
  });

  it('answers 400 for an id of the wrong type (InvalidLockKeyError), 200 for a right one', async () => {
    const response = await request(server()).get('/orders/not-an-object-id').expect(400);
    expect(response.body).toEqual({
      statusCode: 400,
      message: expect.stringMatching(/ObjectId/),
      error: 'Bad Request',
    });
    const id = new ObjectId();
    await client.db(mongo.dbName).collection('orders').insertOne({ _id: id });
    const found = await request(server()).get(`/orders/${id.toHexString()}`).expect(200);
    expect(found.body).toEqual({ id: id.toHexString() });
  });
});
