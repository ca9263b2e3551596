import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
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
export class MongoLockModule extends MongoLockConfigurableModule {}
