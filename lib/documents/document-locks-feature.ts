import { type DynamicModule, Inject, Module, type Provider } from '@nestjs/common';
import type { Document } from 'mongodb';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { LockService } from '../lock.service';
import { resolveDocumentLocksOptions } from './document-input';
import type { DocumentLocks } from './document-locks';
import type { DocumentLocksOptions } from './document-locks-options.interface';
import { registerDocumentLocks } from './document-locks-registry';

/** One `MongoLockModule.forFeature()` entry: an injection name, a collection, its settings. */
export interface DocumentLocksFeature<
  T extends Document = Document,
> extends DocumentLocksOptions<T> {
  /** The name `@InjectDocumentLocks`, `getDocumentLocksToken` and `@LockedDocument` take. */
  name: string;
  /** The collection whose documents are locked. */
  collection: string;
}

/** The injection token of the `DocumentLocks` registered as `name` by `forFeature()`. */
export function getDocumentLocksToken(name: string): string {
  return `MONGO_LOCK:DOCUMENTS:${name}`;
}

/**
 * Injects the `DocumentLocks` that `MongoLockModule.forFeature()` registered as `name`.
 *
 * @example
 * constructor(
 *   @InjectDocumentLocks('accounts') private readonly accounts: DocumentLocks<Account>,
 * ) {}
 */
export function InjectDocumentLocks(name: string): PropertyDecorator & ParameterDecorator {
  return Inject(getDocumentLocksToken(name));
}

/** The module that `forFeature()` returns: one factory provider per entry. */
@Module({})
export class MongoLockFeatureModule {}

function entryError(label: string, message: string, option: string): never {
  throw new InvalidLockOptionsError(`MongoLockModule.forFeature ${label}: ${message}`, {
    option,
  });
}

/** Checks the entries at once (a bad one fails the start-up) and builds their providers. */
export function documentLocksFeatureModule(
  features: readonly DocumentLocksFeature[],
): DynamicModule {
  if (!Array.isArray(features)) {
    entryError('(features)', 'expects an array of { name, collection, ...options }', 'features');
  }
  const names = new Set<string>();
  const providers: Provider[] = features.map((feature: unknown, index) => {
    let label = `entry ${index}`;
    if (typeof feature !== 'object' || feature === null) {
      entryError(label, 'must be an object { name, collection, ...options }', 'features');
    }
    const { name, collection, ...options } = feature as DocumentLocksFeature;
    if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
      entryError(label, 'name must be a non-empty string of at most 200 characters', 'name');
    }
    label = `entry ${index} (${JSON.stringify(name)})`;
    if (names.has(name)) entryError(label, 'the name is given twice', 'name');
    names.add(name);
    try {
      resolveDocumentLocksOptions(collection, options);
    } catch (error) {
      if (!(error instanceof InvalidLockOptionsError)) throw error;
      entryError(label, error.message, error.option);
    }
    return {
      provide: getDocumentLocksToken(name),
      inject: [LockService],
      useFactory: (service: LockService): DocumentLocks => {
        const locks = service.documents(collection, options);
        registerDocumentLocks(service, name, locks);
        return locks;
      },
    };
  });
  return { module: MongoLockFeatureModule, providers, exports: providers };
}
