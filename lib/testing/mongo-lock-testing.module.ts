import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import type { MongoLockModuleOptions } from '../interfaces/mongo-lock-options.interface';
import { LOCK_STORE_FACTORY, LockService } from '../lock.service';
import type { LockStoreFactory } from '../lock.service';
import { LockedMethodsExplorer } from '../locked-methods.explorer';
import { MONGO_LOCK_OPTIONS } from '../mongo-lock.module-definition';
import { IN_MEMORY_URI, LockTestingStore } from './lock-testing-store';

/** Options of `MongoLockTestingModule.forRoot()`: `MongoLockModule`'s, less the connection. */
export interface MongoLockTestingModuleOptions extends Omit<
  MongoLockModuleOptions,
  'uri' | 'client' | 'dbName' | 'collectionName' | 'ensureIndexes' | 'localHandOff'
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
  static forRoot(options: MongoLockTestingModuleOptions = {}): DynamicModule {
    const { isGlobal = false, store, ...lockOptions } = options;
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
          useFactory:
            (lockStore: LockTestingStore): LockStoreFactory =>
            (resolved) =>
              lockStore.connect(resolved),
          inject: [LockTestingStore],
        },
        LockService,
        LockedMethodsExplorer,
      ],
      exports: [LockService, LockTestingStore],
    };
  }
}
