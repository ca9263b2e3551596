import { type DynamicModule, Module, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import {
  type DocumentLocksFeature,
  documentLocksFeatureModule,
} from './documents/document-locks-feature';
import { LockService } from './lock.service';
import { LockedMethodsExplorer } from './locked-methods.explorer';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { checkIsGlobal, fail } from './option-checks';
import type { MongoLockModuleOptions } from './interfaces/mongo-lock-options.interface';
import {
  MONGO_LOCK_OPTIONS,
  MongoLockConfigurableModule,
  type MongoLockModuleAsyncOptions,
  type MongoLockOptionsFactory,
} from './mongo-lock.module-definition';
import { MESSAGES } from './mongo-lock.messages';

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

  /** Nest's own, with an options object required: it fails opaquely on `undefined` or `null`. */
  static override forRoot(options: MongoLockModuleOptions & { isGlobal?: boolean }): DynamicModule {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidLockOptionsError(MESSAGES.moduleOptionsMissing('forRoot'), {
        option: 'options',
      });
    }
    checkIsGlobal(options);
    return super.forRoot(options);
  }

  /** Nest's own, with one of `useFactory`, `useClass` or `useExisting` required. */
  static override forRootAsync(options: MongoLockModuleAsyncOptions): DynamicModule {
    const given: Partial<MongoLockModuleAsyncOptions> =
      (typeof options === 'object' && options) || {};
    const { useFactory, useClass, useExisting } = given;
    if (useFactory === undefined && useClass === undefined && useExisting === undefined) {
      throw new InvalidLockOptionsError(MESSAGES.moduleOptionsMissing('forRootAsync'), {
        option: 'options',
      });
    }
    const ways = [useFactory, useClass, useExisting].filter((way) => way !== undefined);
    if (ways.length > 1) {
      throw new InvalidLockOptionsError(MESSAGES.moduleOptionsTwice, { option: 'options' });
    }
    checkIsGlobal(given);
    // Refused here, not as Nest's TypeError or unknown dependency when the app is made.
    if (useFactory !== undefined && typeof useFactory !== 'function') {
      fail('useFactory', 'a function returning the options', useFactory);
    }
    // Its createMongoLockOptions may be an instance field: only Nest's instance can tell.
    if (useClass !== undefined && typeof useClass !== 'function') {
      fail('useClass', 'a class implementing MongoLockOptionsFactory', useClass);
    }
    const module = super.forRootAsync(options);
    if (useFactory !== undefined) return module;
    const option = useClass === undefined ? 'useExisting' : 'useClass';
    return { ...module, providers: module.providers?.map((each) => checkedFactory(each, option)) };
  }
}

/**
 * The options provider of `useClass` or `useExisting`, checking the instance Nest made (its
 * method may be an instance field): without one, Nest's own TypeError names neither.
 */
function checkedFactory(provider: Provider, option: string): Provider {
  if (!('provide' in provider) || provider.provide !== MONGO_LOCK_OPTIONS) return provider;
  if (!('useFactory' in provider)) return provider;
  const create = provider.useFactory;
  return {
    ...provider,
    useFactory: (factory: Partial<MongoLockOptionsFactory>, ...rest: unknown[]) => {
      if (typeof factory?.createMongoLockOptions !== 'function') {
        fail(option, 'a class with a createMongoLockOptions() method', factory);
      }
      return create(factory, ...rest) as MongoLockModuleOptions | Promise<MongoLockModuleOptions>;
    },
  };
}
