import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { MongoLockModuleOptions } from './interfaces/mongo-lock-options.interface';

/**
 * What `forRootAsync({ useClass })` and `forRootAsync({ useExisting })` expect.
 *
 * @example
 * \@Injectable()
 * class LockConfig implements MongoLockOptionsFactory {
 *   constructor(private readonly config: ConfigService) {}
 *   createMongoLockOptions(): MongoLockModuleOptions {
 *     return { uri: this.config.getOrThrow('MONGODB_URI') };
 *   }
 * }
 * MongoLockModule.forRootAsync({ imports: [ConfigModule], useClass: LockConfig });
 */
export interface MongoLockOptionsFactory {
  createMongoLockOptions(): MongoLockModuleOptions | Promise<MongoLockModuleOptions>;
}

export const {
  ConfigurableModuleClass: MongoLockConfigurableModule,
  MODULE_OPTIONS_TOKEN: MONGO_LOCK_OPTIONS,
  OPTIONS_TYPE: MONGO_LOCK_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: MONGO_LOCK_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<MongoLockModuleOptions>({ moduleName: 'MongoLock' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createMongoLockOptions')
  .setExtras({ isGlobal: false }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();

/**
 * What `MongoLockModule.forRootAsync()` takes: `useFactory` (with `inject`, `imports`),
 * `useClass` or `useExisting`, and `isGlobal`.
 *
 * @example
 * const lockOptions: MongoLockModuleAsyncOptions = {
 *   isGlobal: true,
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ uri: config.getOrThrow('MONGODB_URI') }),
 * };
 */
export type MongoLockModuleAsyncOptions = typeof MONGO_LOCK_ASYNC_OPTIONS_TYPE;
