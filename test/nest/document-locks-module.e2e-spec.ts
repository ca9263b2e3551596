import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { INestApplicationContext } from '@nestjs/common';
import { type Collection, type Document, MongoClient } from 'mongodb';
import {
  type DocumentLockHandle,
  DocumentLocks,
  DocumentNotFoundError,
  getDocumentLocksToken,
  InjectDocumentLocks,
  InvalidLockOptionsError,
  LockedDoc,
  LockedDocument,
  LockNotAcquiredError,
  MongoLockModule,
} from '../../lib';
import { countCommands } from '../lock-service/lock-test-kit';

/** The lock commands, less the change stream's (engine v2 watches the collection it locks in). */
const notChangeStream = (name: string) => !['aggregate', 'getMore', 'killCursors'].includes(name);
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(60_000);

interface Account extends Document {
  _id: string;
  balance: number;
  version: number;
}

@Injectable()
class Ledger {
  constructor(@InjectDocumentLocks('accounts') readonly accounts: DocumentLocks<Account>) {}

  /** Commits through the handle its `@LockedDoc()` parameter receives. */
  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0 })
  async withdraw(
    _id: string,
    amount: number,
    @LockedDoc() lock?: DocumentLockHandle<Account>,
  ): Promise<{ balance: number; version: number; fence: string }> {
    const written = await lock!.commit({ $inc: { balance: -amount } });
    return { balance: written.balance, version: written.version, fence: lock!.fence.toString() };
  }

  /** Reads only: the lock is released after the method. */
  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0 })
  async peek(_id: string, @LockedDoc() lock?: DocumentLockHandle<Account>) {
    const state = await this.accounts.inspect(lock!.doc._id);
    return { balance: lock!.doc.balance, heldInside: state?.held, created: lock!.created };
  }

  @LockedDocument('accounts', '{args.0}', { timeoutMs: 0, onBusy: 'skip' })
  async skipWhenBusy(_id: string): Promise<string> {
    return 'ran';
  }

  @LockedDocument('accounts', '{args.0}', { createIfMissing: { balance: 7, version: 0 } })
  async open(_id: string, @LockedDoc() lock?: DocumentLockHandle<Account>) {
    return { created: lock!.created, balance: lock!.doc.balance };
  }
}

@Injectable()
class UnknownCollectionUser {
  @LockedDocument('nowhere', '{args.0}')
  async touch(_id: string): Promise<void> {}
}

describe('MongoLockModule.forFeature and @LockedDocument on provider methods', () => {
  let mongo: TestMongo;
  let client: MongoClient;
  let app: INestApplicationContext;
  let other: INestApplicationContext;
  let accounts: Collection<Account>;
  let ledger: Ledger;
  const feature = () =>
    MongoLockModule.forFeature([
      { name: 'accounts', collection: 'accounts', version: { field: 'version' } },
    ]);

  beforeAll(async () => {
    mongo = await startTestMongo();
    client = new MongoClient(mongo.uri, { monitorCommands: true });
    await client.connect();
    app = await startAppContext({
      imports: [
        MongoLockModule.forRoot({ client, dbName: mongo.dbName, isGlobal: true, holderId: 'app' }),
        feature(),
      ],
      providers: [Ledger],
    });
    other = await startAppContext({
      imports: [lockModule(mongo, { isGlobal: true, holderId: 'other' }), feature()],
    });
    ledger = app.get(Ledger);
    accounts = client.db(mongo.dbName).collection<Account>('accounts');
  });

  beforeEach(async () => {
    await accounts.deleteMany({});
    await accounts.insertOne({ _id: 'a', balance: 100, version: 1 });
  });

  afterAll(async () => {
    await other?.close();
    await app?.close();
    await client?.close();
    await mongo?.stop();
  });

  it('registers one DocumentLocks per entry, injectable and reachable by its token', () => {
    const byToken = app.get<DocumentLocks<Account>>(getDocumentLocksToken('accounts'));
    expect(byToken).toBeInstanceOf(DocumentLocks);
    expect(byToken).toBe(ledger.accounts);
    expect(byToken.collectionName).toBe('accounts');
    expect(byToken.version).toEqual({ field: 'version', type: 'int' });
  });

  it('refuses duplicate names and bad entries at once, naming the entry', () => {
    const duplicate = () =>
      MongoLockModule.forFeature([
        { name: 'accounts', collection: 'accounts' },
        { name: 'accounts', collection: 'others' },
      ]);
    expect(duplicate).toThrow(InvalidLockOptionsError);
    expect(duplicate).toThrow(/entry 1 \("accounts"\).*given twice/);
    expect(() =>
      MongoLockModule.forFeature([
        { name: 'ok', collection: 'ok' },
        { name: 'bad', collection: 'bad', lockField: 'a.b' },
      ]),
    ).toThrow(/entry 1 \("bad"\): lockField/);
    expect(() => MongoLockModule.forFeature([{ name: 'c', collection: '$nope' }])).toThrow(
      /entry 0 \("c"\): collection/,
    );
    expect(() => MongoLockModule.forFeature([{ name: '', collection: 'x' }])).toThrow(
      /entry 0: name/,
    );
  });

  it('refuses at start-up a @LockedDocument whose name no forFeature() registered', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [lockModule(mongo, { isGlobal: true, holderId: 'unknown' }), feature()],
      providers: [UnknownCollectionUser],
    }).compile();
    moduleRef.useLogger(false);
    try {
      await expect(moduleRef.init()).rejects.toThrow(
        /UnknownCollectionUser\.touch names "nowhere"/,
      );
    } finally {
      await moduleRef.close();
    }
  });

  it('commits through @LockedDoc() on a provider method, and sends nothing after the commit', async () => {
    const commands = countCommands(client);
    const result = await ledger.withdraw('a', 30);
    const sent = commands.names.filter(notChangeStream);
    expect(result).toEqual({ balance: 70, version: 2, fence: expect.stringMatching(/^\d+$/) });
    // One round trip to lock and read, one to write and unlock; no release after the commit.
    expect(sent).toHaveLength(2);
    const stored = await accounts.findOne({ _id: 'a' });
    expect(stored).toMatchObject({ balance: 70, version: 2 });
    expect((await ledger.accounts.inspect('a'))?.held).toBe(false);
  });

  it('releases after a method that did not commit, and gives it the document read when locked', async () => {
    const commands = countCommands(client);
    const result = await ledger.peek('a');
    const sent = commands.names.filter(notChangeStream);
    expect(result).toEqual({ balance: 100, heldInside: true, created: false });
    expect((await ledger.accounts.inspect('a'))?.held).toBe(false);
    // Lock, inspect, release.
    expect(sent).toHaveLength(3);
    expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 100, version: 1 });
  });

  it('fails at once when the document is missing, creates it with createIfMissing', async () => {
    await expect(ledger.peek('missing')).rejects.toBeInstanceOf(DocumentNotFoundError);
    await expect(ledger.open('new')).resolves.toEqual({ created: true, balance: 7 });
    await expect(ledger.open('new')).resolves.toEqual({ created: false, balance: 7 });
  });

  it('waits for nobody with timeoutMs 0 and skips with onBusy skip while another holder has the document', async () => {
    const theirs = other.get<DocumentLocks<Account>>(getDocumentLocksToken('accounts'));
    const held = await theirs.acquire('a', { ttlMs: 30_000 });
    try {
      await expect(ledger.withdraw('a', 1)).rejects.toBeInstanceOf(LockNotAcquiredError);
      await expect(ledger.skipWhenBusy('a')).resolves.toBeUndefined();
    } finally {
      await held.release();
    }
    await expect(ledger.skipWhenBusy('a')).resolves.toBe('ran');
    expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 100 });
  });
});
