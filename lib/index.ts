// The public API. Anything not exported here is internal and may change without notice.
/**
 * Distributed locks for NestJS on MongoDB: the module, `LockService`, `@Locked`, document
 * locks, leadership (`@OnlyLeader`), and the errors.
 *
 * @module nestjs-mongo-lock
 */
export { MongoLockModule } from './mongo-lock.module';
export {
  MONGO_LOCK_OPTIONS,
  type MongoLockModuleAsyncOptions,
  type MongoLockOptionsFactory,
} from './mongo-lock.module-definition';
export { LockService, type LockDiagnostics } from './lock.service';
export type { LockHandle } from './lock-handle';
export { OnlyLeader } from './decorators/only-leader.decorator';
export type { Leadership, LeadershipOptions, CampaignOptions } from './leadership/leadership';
export type { LeaderTerm } from './leadership/leader-term';
export type { LeaderInfo } from './leadership/leader-watch';
export * from './errors';
export * from './interfaces';
export { Locked, createLockedDecorator, type LockedOptions } from './decorators/locked.decorator';
export type { LockedMetadata, LockedMethodReturn } from './decorators/locked-metadata';
export { LockHandleParam, LockSession, LockedDoc } from './decorators/param.decorators';
export { LockedInterceptor } from './interceptors/locked.interceptor';
export {
  lockKey,
  type LockKeyContext,
  type LockKeySpec,
  type LockKeyValues,
} from './keys/key-template';
export { MAX_LOCK_KEY_BYTES, MAX_LOCK_KEYS } from './keys/lock-key';
export { DocumentLocks } from './documents/document-locks';
export type { DocumentLockHandle } from './documents/document-lock-handle';
export type {
  DocumentLocksOptions,
  DocumentLockOptions,
} from './documents/document-locks-options.interface';
export type { DocumentUpdate } from './store/documents/document-writes';
export type { DocumentVersion, DocumentVersionType } from './store/documents/document-version';
export {
  MongoLockFeatureModule,
  type DocumentLocksFeature,
  getDocumentLocksToken,
  InjectDocumentLocks,
} from './documents/document-locks-feature';
export {
  LockedDocument,
  createLockedDocumentDecorator,
  type LockedDocumentOptions,
  type DocumentIdSpec,
} from './decorators/locked-document.decorator';
export { IfMatch, VersionETag } from './http/version.decorators';
export type { IfMatchOptions } from './http/if-match';
export { DocumentHttpInterceptor } from './http/document-http.interceptor';
