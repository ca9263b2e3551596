import { type DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import {
  type DocumentLocksFeature,
  documentLocksFeatureModule,
} from './documents/document-locks-feature';
import { LockService } from './lock.service';
import { LockedMethodsExplorer } from './locked-methods.explorer';
import { MongoLockConfigurableModule } from './mongo-lock.module-definition';

/**
 * Distributed locks on MongoDB: exports `LockService`, and makes `@Locked` work on controller
 * handlers and singleton providers. For `forRootAsync()`, see `MongoLockModuleAsyncOptions`.
 *
 * @example
 * // app.module.ts
 * \@Module({
 *   imports: [MongoLockModule.forRoot({ uri: process.env.MONGODB_URI, isGlobal: true })],
 * })
 * export class AppModule {}
 */
@Module({
  imports: [DiscoveryModule],
  providers: [LockService, LockedMethodsExplorer],
  exports: [LockService],
})
export class MongoLockModule extends MongoLockConfigurableModule {
  /**
   * Registers and exports one `DocumentLocks` per entry, for `@InjectDocumentLocks(name)` and
   * `@LockedDocument(name, …)`. Needs the app's `LockService` in reach (`isGlobal: true` on
   * `forRoot`). Throws `InvalidLockOptionsError` naming a duplicate or bad entry.
   *
   * @example
   * \@Module({
   *   imports: [
   *     MongoLockModule.forFeature([
   *       { name: 'accounts', collection: 'accounts', version: { field: 'version' } },
   *     ]),
   *   ],
   * })
   * export class AccountsModule {}
   */
  static forFeature(features: DocumentLocksFeature[]): DynamicModule {
    return documentLocksFeatureModule(features);
  }
}
