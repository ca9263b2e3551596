import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import type { MongoLockModuleOptions } from '../interfaces/mongo-lock-options.interface';
import { LOCK_STORE_FACTORY, LockService } from '../lock.service';
import type { LockStoreFactory } from '../lock.service';
import { LockedMethodsExplorer } from '../locked-methods.explorer';
import { checkIsGlobal, fail, optionsObject } from '../option-checks';
import { MONGO_LOCK_OPTIONS } from '../mongo-lock.module-definition';
import { LockTestingStore } from './lock-testing-store';

/** Unused by the in-memory store; the `.invalid` domain never resolves, should anything try. */
const IN_MEMORY_URI = 'mongodb://in-memory.nestjs-mongo-lock.invalid/test';

/** `MongoLockModule`'s options of the connection: the in-memory store has none. */
const CONNECTION_OPTIONS = ['uri', 'client', 'dbName', 'collectionName', 'ensureIndexes'] as const;
/** The testing module sets these itself (see `forRoot`). */
const KIT_OPTIONS = ['localHandOff'] as const;

/**
 * Options of `MongoLockTestingModule.forRoot()`: `MongoLockModule`'s, less the connection and
 * `localHandOff` (given, they are refused).
 */
export interface MongoLockTestingModuleOptions extends Omit<
  MongoLockModuleOptions,
  (typeof CONNECTION_OPTIONS)[number] | (typeof KIT_OPTIONS)[number]
> {
  /** Make `LockService` (and `LockTestingStore`) injectable everywhere. Default `false`. */
  isGlobal?: boolean;
  /** The in-memory store; default: a new one per application (see {@link LockTestingStore}). */
  store?: LockTestingStore;
}

/**
 * `MongoLockModule` without MongoDB, for tests: the same `LockService` and `@Locked` over an
 * in-memory {@link LockTestingStore}; exports both. As with `MongoLockModule`, call `init()` on
 * the testing module or app (to bind `@Locked` provider methods) and `close()` after.
 * In place of an app's `MongoLockModule`, override the module object its `forRoot()` returned
 * (`overrideModule(LOCKS)`): `overrideModule(MongoLockModule)` matches no import.
 *
 * @example
 * const moduleRef = await Test.createTestingModule({
 *   imports: [MongoLockTestingModule.forRoot()],
 *   providers: [LedgerService],
 * }).compile();
 * await moduleRef.init();
 * const store = moduleRef.get(LockTestingStore);
 * await store.holdAs('ledger:acc-1', 'other-instance');
 * const ledger = moduleRef.get(LedgerService);
 * await expect(ledger.post('acc-1', 5)).rejects.toThrow(LockNotAcquiredError);
 */
@Module({})
export class MongoLockTestingModule {
  /**
   * Throws `InvalidLockOptionsError` naming any of `uri`, `client`, `dbName`, `collectionName`,
   * `ensureIndexes` and `localHandOff` given.
   */
  static forRoot(options?: MongoLockTestingModuleOptions | null): DynamicModule {
    const given = optionsObject(options);
    refuseMongoDbOptions(given);
    checkIsGlobal(given);
    const { isGlobal = false, store, ...lockOptions } = given;
    if (store !== undefined && !(store instanceof LockTestingStore)) {
      fail('store', 'a LockTestingStore', store);
    }
    // Every hand-off writes, so a release finds a lease that `expire()` ended, as on MongoDB.
    const moduleOptions: MongoLockModuleOptions = {
      ...lockOptions,
      uri: IN_MEMORY_URI,
      localHandOff: false,
    };
    return {
      module: MongoLockTestingModule,
      global: isGlobal,
      imports: [DiscoveryModule],
      providers: [
        { provide: MONGO_LOCK_OPTIONS, useValue: moduleOptions },
        // A factory: each application made from this module gets its own store unless given one.
        { provide: LockTestingStore, useFactory: () => store ?? new LockTestingStore() },
        {
          provide: LOCK_STORE_FACTORY,
          useFactory: (lockStore: LockTestingStore): LockStoreFactory =>
            lockStore.connect.bind(lockStore),
          inject: [LockTestingStore],
        },
        LockService,
        LockedMethodsExplorer,
      ],
      exports: [LockService, LockTestingStore],
    };
  }
}

/**
 * Refuses what only `MongoLockModule` uses, naming it: silently dropped, a spread of the app's
 * options would hide that the test runs on neither its database nor its hand-off setting.
 */
function refuseMongoDbOptions(options: object): void {
  const given = (name: string) => (options as Record<string, unknown>)[name] !== undefined;
  const connection = CONNECTION_OPTIONS.filter(given);
  const kit = KIT_OPTIONS.filter(given);
  const names = [...connection, ...kit];
  if (names.length === 0) return;
  const reasons = [
    connection.length > 0 ? 'it connects to no MongoDB (its lock collection is in memory)' : '',
    kit.length > 0 ? 'it sets localHandOff: false itself (every hand-off writes)' : '',
  ].filter(Boolean);
  throw new InvalidLockOptionsError(
    `MongoLockTestingModule.forRoot() takes no ${names.join(', ')}: ` +
      `${reasons.join(', and ')}; leave ${names.length > 1 ? 'them' : 'it'} out`,
    { option: names[0] },
  );
}
