import { MongoClient } from 'mongodb';
import {
  InvalidLockOptionsError,
  LockService,
  MongoLockError,
  type MongoLockModuleOptions,
} from '../../lib';
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

describe('LockTestingStore clock', () => {
  it.each([
    ['undefined', () => undefined, 'undefined'],
    ['a string', () => '1700000000000', '"1700000000000"'],
    ['NaN', () => NaN, 'NaN'],
    ['Infinity', () => Infinity, 'Infinity'],
    ['past what a Date holds', () => 9e15, '9000000000000000'],
    ['an invalid Date', () => new Date('no date'), 'an invalid Date'],
  ])('refuses a reading of %s with InvalidLockOptionsError naming clock', async (_, clock, got) => {
    const store = new LockTestingStore({ clock: clock as () => number });
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ store })],
    });
    try {
      const expected = {
        name: 'InvalidLockOptionsError',
        option: 'clock',
        message: `clock must return ms since the epoch or a valid Date, got ${got}`,
      };
      await expect(store.holdAs('k', 'other-instance')).rejects.toMatchObject(expected);
      const acquired = moduleRef.get(LockService).acquire('k', { timeoutMs: 0 });
      await expect(acquired).rejects.toBeInstanceOf(MongoLockError);
      await expect(acquired).rejects.toMatchObject(expected);
      expect(() => store.now()).toThrow(InvalidLockOptionsError);
    } finally {
      await moduleRef.close();
    }
  });

  it('takes a clock that returns a Date', async () => {
    let now = new Date('2030-01-01T00:00:00Z');
    const store = new LockTestingStore({ clock: () => now });
    const other = await store.holdAs('k', 'other-instance', 60_000);
    expect(store.now()).toBe(now.getTime());
    expect(store.inspect('k')).toMatchObject({ held: true, remainingMs: 60_000 });
    now = new Date(now.getTime() + 60_000);
    expect(store.inspect('k')?.held).toBe(false);
    await expect(other.release()).resolves.toBe('expired');
  });

  it('refuses a clock that is not a function when made', () => {
    expect(() => new LockTestingStore({ clock: 5 as unknown as () => number })).toThrow(
      InvalidLockOptionsError,
    );
  });

  it('refuses a misspelt option and options that are not an object, naming them', () => {
    expect(() => new LockTestingStore({ clok: Date.now } as never)).toThrow(
      'clok is not an option (did you mean clock?)',
    );
    expect(() => new LockTestingStore(5 as never)).toThrow(InvalidLockOptionsError);
    expect(new LockTestingStore(null).now()).toBeGreaterThan(0);
  });
});

describe('MongoLockTestingModule.forRoot() store', () => {
  it('refuses a store that is not a LockTestingStore when the module is made', () => {
    const error = forRootError({ store: {} });
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as Error).message).toBe('store must be a LockTestingStore, got an object');
  });
});
