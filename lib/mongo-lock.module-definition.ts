import {
  type ConfigurableModuleAsyncOptions,
  ConfigurableModuleBuilder,
  type ConfigurableModuleCls,
} from '@nestjs/common';
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

/** What `forRoot()` and `forRootAsync()` take besides the module options. @inline */
interface MongoLockExtras {
  isGlobal: boolean;
}

// Typed explicitly: the emitted .d.ts would otherwise write `import("@nestjs/common", { with:
// { "resolution-mode": ... } })`, which TypeScript before 5.3 cannot parse (Nest 10 apps pin 5.1).
export const {
  ConfigurableModuleClass: MongoLockConfigurableModule,
  MODULE_OPTIONS_TOKEN: MONGO_LOCK_OPTIONS,
}: {
  ConfigurableModuleClass: ConfigurableModuleCls<
    MongoLockModuleOptions,
    'forRoot',
    'createMongoLockOptions',
    MongoLockExtras
  >;
  MODULE_OPTIONS_TOKEN: string | symbol;
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
 * `useClass` or `useExisting`, and `isGlobal`. @interface
 *
 * @example
 * const lockOptions: MongoLockModuleAsyncOptions = {
 *   isGlobal: true,
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ uri: config.getOrThrow('MONGODB_URI') }),
 * };
 */
export type MongoLockModuleAsyncOptions = ConfigurableModuleAsyncOptions<
  MongoLockModuleOptions,
  'createMongoLockOptions'
> &
  Partial<MongoLockExtras>;
