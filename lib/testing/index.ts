/**
 * Test applications without MongoDB: `MongoLockTestingModule` and its in-memory store.
 *
 * @module nestjs-mongo-lock/testing
 */
export {
  MongoLockTestingModule,
  type MongoLockTestingModuleOptions,
} from './mongo-lock-testing.module';
export {
  LockTestingStore,
  type ForeignHoldOptions,
  type ForeignLock,
  type ForeignReleaseOutcome,
  type LockTestingStoreOptions,
} from './lock-testing-store';
