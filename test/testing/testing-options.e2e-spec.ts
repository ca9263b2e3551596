import { MongoClient } from 'mongodb';
import { InvalidLockOptionsError, LockService, type MongoLockModuleOptions } from '../../lib';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { startTestingModule } from './testing-kit';

jest.setTimeout(30_000);

/** What `forRoot()` threw, or `undefined`. */
function forRootError(options: object): unknown {
  try {
    MongoLockTestingModule.forRoot(options);
    return undefined;
  } catch (error) {
    return error;
  }
}

describe('MongoLockTestingModule.forRoot() options', () => {
  it.each([
    ['uri', { uri: 'mongodb://127.0.0.1:27017/app' }],
    ['dbName', { dbName: 'app' }],
    ['collectionName', { collectionName: 'app_locks' }],
    ['ensureIndexes', { ensureIndexes: false }],
    ['localHandOff', { localHandOff: true }],
    ['localHandOff', { localHandOff: false }],
  ])('refuses %s, naming it', (option, options) => {
    const error = forRootError(options);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect(error).toMatchObject({ option });
    expect((error as Error).message).toContain(
      `MongoLockTestingModule.forRoot() takes no ${option}`,
    );
  });

  it('refuses a client (never connected), naming it rather than "got both"', async () => {
    const client = new MongoClient('mongodb://nowhere.invalid/app');
    try {
      const error = forRootError({ client });
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect((error as Error).message).toMatch(
        /^MongoLockTestingModule\.forRoot\(\) takes no client:/,
      );
    } finally {
      await client.close();
    }
  });

  it("names every connection option of the app's options spread into it", () => {
    const appOptions: MongoLockModuleOptions = {
      uri: 'mongodb://127.0.0.1:27017/app',
      dbName: 'app',
      localHandOff: true,
      defaultTtlMs: 10_000,
    };
    const error = forRootError({ ...appOptions, holderId: 'app' });
    expect((error as Error).message).toMatch(
      /^MongoLockTestingModule\.forRoot\(\) takes no uri, dbName, localHandOff: it connects to no MongoDB .*, and it sets localHandOff: false itself/,
    );
  });

  it('refuses them in its type too', () => {
    // @ts-expect-error: the testing module has no connection options.
    expect(() => MongoLockTestingModule.forRoot({ uri: 'mongodb://localhost/app' })).toThrow(
      InvalidLockOptionsError,
    );
    // @ts-expect-error: nor localHandOff.
    expect(() => MongoLockTestingModule.forRoot({ localHandOff: true })).toThrow(
      InvalidLockOptionsError,
    );
  });

  it('takes the options left once they are taken out, and undefined ones', async () => {
    const {
      uri: _uri,
      dbName: _dbName,
      ...rest
    } = {
      uri: 'mongodb://127.0.0.1:27017/app',
      dbName: 'app',
      defaultTtlMs: 10_000,
      holderId: 'app',
    };
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ ...rest, ...{ collectionName: undefined } })],
    });
    try {
      const handle = await moduleRef.get(LockService).acquire('k');
      expect(moduleRef.get(LockTestingStore).inspect('k')).toMatchObject({ holderId: 'app' });
      expect(handle.expiresAt.getTime() - Date.now()).toBeLessThanOrEqual(10_000);
      await handle.release();
    } finally {
      await moduleRef.close();
    }
  });
});
