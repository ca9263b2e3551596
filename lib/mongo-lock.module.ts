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
 * Distributed locks on MongoDB. Provides and exports `LockService`; makes `@Locked` work on
 * controller handlers and on singleton providers of the application.
 *
 * @example
 * // app.module.ts
 * \@Module({
 *   imports: [MongoLockModule.forRoot({ uri: process.env.MONGODB_URI, isGlobal: true })],
 * })
 * export class AppModule {}
 *
 * // or from configuration
 * MongoLockModule.forRootAsync({
 *   isGlobal: true,
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ uri: config.getOrThrow('MONGODB_URI') }),
 * });
 */
@Module({
  imports: [DiscoveryModule],
  providers: [LockService, LockedMethodsExplorer],
  exports: [LockService],
})
export class MongoLockModule extends MongoLockConfigurableModule {
  /**
   * Registers one injectable `DocumentLocks` per entry (built with `LockService.documents()`),
   * exported from the returned module: inject it with `@InjectDocumentLocks(name)`, get it with
   * `app.get(getDocumentLocksToken(name))`, lock its documents with `@LockedDocument(name, …)`.
   * Needs the application's `LockService` in reach: `forRoot({ isGlobal: true })`. Duplicate
   * names and bad entries fail at once with `InvalidLockOptionsError` naming the entry.
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
