import { Injectable, Logger, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import {
  InvalidLockOptionsError,
  Locked,
  LockService,
  LockServiceClosedError,
  MONGO_LOCK_OPTIONS,
  MongoLockError,
  MongoLockModule,
  type MongoLockModuleOptions,
  type MongoLockOptionsFactory,
} from '../../lib';
import { MongoLockTestingModule } from '../../lib/testing';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { TS_CHILD_FLAGS } from '@nestjs-mongo-lock/process-harness';
import { lockModule, openLockCollection, startAppContext } from './support/nest-apps';

jest.setTimeout(90_000);

let mongo: TestMongo;

beforeAll(async () => {
  mongo = await startTestMongo();
});

afterAll(async () => {
  await mongo?.stop();
});

/** Stands in for a configuration module. */
@Injectable()
class AppConfig {
  readonly lockOptions = (): MongoLockModuleOptions => ({
    uri: mongo.uri,
    dbName: mongo.dbName,
    holderId: 'from-config',
  });
}

@Module({ providers: [AppConfig], exports: [AppConfig] })
class ConfigModule {}

@Injectable()
class LockOptionsFactory implements MongoLockOptionsFactory {
  constructor(private readonly config: AppConfig) {}
  createMongoLockOptions(): MongoLockModuleOptions {
    return { ...this.config.lockOptions(), holderId: 'from-class' };
  }
}

/** Its factory method an instance field, as Nest allows (it calls the instance's). */
@Injectable()
class FieldOptionsFactory implements MongoLockOptionsFactory {
  constructor(private readonly config: AppConfig) {}
  createMongoLockOptions = (): MongoLockModuleOptions => ({
    ...this.config.lockOptions(),
    holderId: 'from-field',
  });
}

describe('MongoLockModule configuration', () => {
  it('forRoot provides a working LockService', async () => {
    const app = await startAppContext({ imports: [lockModule(mongo, { holderId: 'root' })] });
    try {
      const locks = app.get(LockService);
      expect(locks.holderId).toBe('root');
      await locks.withLock('module:root', async () => {
        expect((await locks.inspect('module:root'))?.holderId).toBe('root');
      });
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with useFactory and inject', async () => {
    const app = await startAppContext({
      imports: [
        MongoLockModule.forRootAsync({
          imports: [ConfigModule],
          inject: [AppConfig],
          useFactory: async (config: AppConfig) => config.lockOptions(),
        }),
      ],
    });
    try {
      expect(app.get(LockService).holderId).toBe('from-config');
      expect(app.get(MONGO_LOCK_OPTIONS)).toMatchObject({ holderId: 'from-config' });
      await app.get(LockService).withLock('module:factory', () => undefined);
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with useClass', async () => {
    const app = await startAppContext({
      imports: [
        MongoLockModule.forRootAsync({ imports: [ConfigModule], useClass: LockOptionsFactory }),
      ],
    });
    try {
      expect(app.get(LockService).holderId).toBe('from-class');
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with a useClass whose createMongoLockOptions is an instance field', async () => {
    const app = await startAppContext({
      imports: [
        MongoLockModule.forRootAsync({ imports: [ConfigModule], useClass: FieldOptionsFactory }),
      ],
    });
    try {
      expect(app.get(LockService).holderId).toBe('from-field');
    } finally {
      await app.close();
    }
  });

  it('isGlobal makes LockService injectable in every module', async () => {
    @Injectable()
    class Consumer {
      constructor(readonly locks: LockService) {}
    }
    @Module({ providers: [Consumer], exports: [Consumer] })
    class FeatureModule {}

    const app = await startAppContext({
      imports: [lockModule(mongo, { isGlobal: true }), FeatureModule],
    });
    try {
      expect(app.get(Consumer).locks).toBe(app.get(LockService));
    } finally {
      await app.close();
    }
  });

  it.each<[string, Partial<MongoLockModuleOptions>, RegExp]>([
    ['defaultTtlMs', { defaultTtlMs: 5 }, /defaultTtlMs must be an integer from 1000/],
    ['changeStreams', { changeStreams: 'sometimes' as never }, /changeStreams must be/],
    ['collectionName', { collectionName: 'a$b' }, /collectionName/],
  ])('fails at start-up on an invalid %s, naming it', async (option, options, message) => {
    const start = async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [lockModule(mongo, options)],
      }).compile();
      await moduleRef.init();
      await moduleRef.close();
    };
    const error = await start().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).option).toBe(option);
    expect((error as Error).message).toMatch(message);
  });

  it('forRoot refuses a misspelt option at start-up, naming it and the right name', async () => {
    const start = async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [lockModule(mongo, { defaultTTLMs: 60_000 } as never)],
      }).compile();
      await moduleRef.init();
      await moduleRef.close();
    };
    const error = await start().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).option).toBe('defaultTTLMs');
    expect((error as Error).message).toMatch(
      /defaultTTLMs is not an option \(did you mean defaultTtlMs\?\)/,
    );
  });

  it('forRootAsync refuses a misspelt option from the factory', async () => {
    const start = async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [
          MongoLockModule.forRootAsync({
            useFactory: () => ({ uri: mongo.uri, dbName: mongo.dbName, defaultTimeoutMS: 500 }),
          }),
        ],
      }).compile();
      await moduleRef.init();
      await moduleRef.close();
    };
    const error = await start().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).option).toBe('defaultTimeoutMS');
    expect((error as Error).message).toMatch(/did you mean defaultTimeoutMs\?/);
  });

  it('forRoot and forRootAsync without their options fail at once, saying what they need', () => {
    for (const missing of [undefined, null]) {
      expect(() => MongoLockModule.forRoot(missing as never)).toThrow(InvalidLockOptionsError);
      expect(() => MongoLockModule.forRoot(missing as never)).toThrow(
        'MongoLockModule.forRoot() needs an options object: { uri } or { client }',
      );
    }
    for (const given of [{}, { isGlobal: true }, undefined]) {
      expect(() => MongoLockModule.forRootAsync(given as never)).toThrow(
        /forRootAsync\(\) needs one of useFactory, useClass or useExisting/,
      );
    }
  });

  it('forRootAsync refuses a useFactory or useClass Nest could not call, both, or a non-boolean isGlobal, when made', () => {
    const refused = (given: object, message: string) => {
      const call = () => MongoLockModule.forRootAsync(given);
      expect(call).toThrow(InvalidLockOptionsError);
      expect(call).toThrow(message);
    };
    refused({ useFactory: undefined }, 'needs one of useFactory, useClass or useExisting');
    refused({ useFactory: 'config' }, 'useFactory must be a function returning the options');
    refused({ useClass: {} }, 'useClass must be a class implementing MongoLockOptionsFactory');
    // Nest would use the factory and drop the class unsaid.
    refused({ useFactory: () => ({}), useClass: class {} }, 'not several');
    // Nest would make the module global for any truthy value.
    refused({ useFactory: () => ({}), isGlobal: 'no' }, 'isGlobal must be true or false, got "no"');
    expect(() => MongoLockModule.forRoot({ uri: 'mongodb://x', isGlobal: 1 as never })).toThrow(
      'isGlobal must be true or false, got 1',
    );
  });

  it('refuses to start with forRoot imported twice with different options', async () => {
    @Injectable()
    class Ledger {
      @Locked('ledger')
      async post(): Promise<void> {}
    }
    @Module({
      imports: [lockModule(mongo, { collectionName: 'other_locks' })],
      providers: [Ledger],
    })
    class LedgerModule {}
    const moduleRef = await Test.createTestingModule({
      imports: [lockModule(mongo, { isGlobal: true }), LedgerModule],
    }).compile();
    try {
      await expect(moduleRef.init()).rejects.toThrow(
        /forRoot\(\) is imported 2 times in this application/,
      );
    } finally {
      await moduleRef.close().catch(() => undefined);
    }
  });

  // Each import has its own LockService: the route locked through one, the provider method
  // through the other, and the provider call waited for its own handler until timeoutMs.
  it('refuses to start with forRoot imported twice on one collection, and closes both services', async () => {
    @Injectable()
    class Orders {
      @Locked('order:{args.0}', { timeoutMs: 1_000 })
      async pay(id: string): Promise<string> {
        return `paid ${id}`;
      }
    }
    @Module({ imports: [lockModule(mongo)], providers: [Orders], exports: [Orders] })
    class OrdersModule {}
    const moduleRef = await Test.createTestingModule({
      imports: [lockModule(mongo, { isGlobal: true }), OrdersModule],
    }).compile();
    try {
      // What to do instead, not 'forFeature() elsewhere', which gives no LockService.
      await expect(moduleRef.init()).rejects.toThrow(
        /forRoot\(\) is imported 2 times in this application.*Import it once, with isGlobal: true, in the root module: every module can then inject LockService and use @Locked without importing it \(MongoLockModule.forFeature\(\) registers document locks, not a LockService\)$/,
      );
      const services = moduleRef.get(LockService, { strict: false, each: true });
      expect(services).toHaveLength(2);
      for (const locks of services) {
        await expect(locks.acquire('refused:any')).rejects.toBeInstanceOf(LockServiceClosedError);
      }
    } finally {
      await moduleRef.close().catch(() => undefined);
    }
  });

  // A feature module with a route and a provider on one key, locking in its own collection while
  // the app's import locks elsewhere: the two would not exclude each other.
  it.each([
    [
      'forRootAsync',
      () => MongoLockModule.forRootAsync({ useFactory: () => ({ uri: mongo.uri }) }),
    ],
    ['MongoLockTestingModule.forRoot', () => MongoLockTestingModule.forRoot()],
  ])('refuses to start with %s beside forRoot', async (_name, secondImport) => {
    @Injectable()
    class Reports {
      @Locked('report:{args.0}')
      async build(id: string): Promise<string> {
        return id;
      }
    }
    @Module({ imports: [secondImport()], providers: [Reports] })
    class ReportsModule {}
    const moduleRef = await Test.createTestingModule({
      imports: [ReportsModule, lockModule(mongo, { isGlobal: true })],
    }).compile();
    try {
      const refusal: unknown = await moduleRef.init().catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(MongoLockError);
      expect((refusal as Error).message).toMatch(
        /forRoot\(\) is imported 2 times in this application.*Import it once, with isGlobal: true/,
      );
    } finally {
      await moduleRef.close().catch(() => undefined);
    }
  });

  it('starts with a LockService of its own beside the module', async () => {
    @Module({
      providers: [
        { provide: 'AUDIT_LOCKS', useFactory: () => new LockService({ uri: mongo.uri }) },
      ],
    })
    class AuditModule {}
    const app = await startAppContext({ imports: [lockModule(mongo), AuditModule] });
    await app.close();
  });

  it('starts two applications in one process, each with its own import, warning of an instance they share', async () => {
    @Injectable()
    class Ledger {
      @Locked('ledger:{args.0}')
      async post(account: string): Promise<string | undefined> {
        return LockService.current()?.key ?? `unlocked ${account}`;
      }
    }
    const shared = new Ledger();
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const start = (holderId: string) =>
      startAppContext({
        imports: [lockModule(mongo, { holderId })],
        providers: [Ledger, { provide: 'SHARED_LEDGER', useValue: shared }],
      });
    const appA = await start('app-a');
    const appB = await start('app-b');
    try {
      expect(warn).toHaveBeenCalledWith(expect.stringMatching(/shared by several applications/));
      for (const app of [appA, appB]) {
        await expect(app.get(Ledger).post('1')).resolves.toBe('ledger:1');
      }
      await expect(shared.post('2')).resolves.toBe('ledger:2');
    } finally {
      warn.mockRestore();
      await Promise.all([appA.close(), appB.close()]);
    }
  });
});

describe('MongoLockModule shutdown', () => {
  @Injectable()
  class Worker {
    @Locked('shutdown:job')
    async runForever(): Promise<void> {
      await new Promise(() => undefined);
    }
  }

  it('app.close() releases every lock the instance holds', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo, { holderId: 'closing' })],
      providers: [Worker],
    });
    const locks = app.get(LockService);
    const collection = await openLockCollection(mongo);
    try {
      await locks.acquire('shutdown:manual', { ttlMs: 60_000 });
      void app
        .get(Worker)
        .runForever()
        .catch(() => undefined);
      await waitFor(async () => (await collection.ownedBy('closing')).length === 2);
      await app.close();
      expect(await collection.ownedBy('closing')).toEqual([]);
    } finally {
      await collection.close();
    }
  });

  it('SIGTERM with enableShutdownHooks releases the child process’s locks', async () => {
    const collection = await openLockCollection(mongo);
    try {
      const child = spawn(
        process.execPath,
        [...TS_CHILD_FLAGS, join(__dirname, 'fixtures/shutdown-child.ts')],
        {
          cwd: join(__dirname, '../..'),
          env: { ...process.env, MONGODB_URI: mongo.uri, MONGODB_DB: mongo.dbName },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let output = '';
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
        (resolve) => child.on('exit', (code, signal) => resolve({ code, signal })),
      );
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          if (chunk.toString().includes('ready')) resolve();
        });
        void exited.then(() => reject(new Error(`child exited early: ${output}`)));
      });
      expect(await collection.ownedBy('sigterm-child')).toHaveLength(2);
      child.kill('SIGTERM');
      const exit = await exited;
      // Nest re-raises the signal after closing the application.
      expect(exit.signal === 'SIGTERM' || exit.code === 0).toBe(true);
      expect(await collection.ownedBy('sigterm-child')).toEqual([]);
    } finally {
      await collection.close();
    }
  });
});

describe('MongoLockModule refused start-up', () => {
  // Nest runs no shutdown hook when init fails: the module closes its LockService itself.
  it('closes the connection it opened, so a process that caught the refusal ends by itself', async () => {
    const child = spawn(
      process.execPath,
      [...TS_CHILD_FLAGS, join(__dirname, 'fixtures/refused-startup-child.ts')],
      {
        cwd: join(__dirname, '../..'),
        env: { ...process.env, MONGODB_URI: mongo.uri, MONGODB_DB: mongo.dbName },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null | 'still running'>((resolve) => {
      child.on('exit', (code) => resolve(code));
      // Far past a start-up and close: the child is stuck on an open handle.
      setTimeout(() => resolve('still running'), 30_000).unref();
    });
    try {
      expect(await exited).toBe(0);
      expect(output).toMatch(/refused: SyncReports\.build is @Locked but is neither async/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});

async function waitFor(check: () => Promise<boolean>): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt += 1) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('condition not met');
}
