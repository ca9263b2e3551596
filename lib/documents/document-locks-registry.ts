import type { Document } from 'mongodb';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { MongoLockError } from '../errors/mongo-lock.error';
import type { DocumentLocks } from './document-locks';

/**
 * `forFeature()`'s `DocumentLocks` by name, for `@LockedDocument`; keyed by `LockService` so
 * two applications in one process each find their own.
 */
const registered = new WeakMap<object, Map<string, DocumentLocks>>();

/** Records `locks` under `name` for `service`; the same name for other settings is refused. */
export function registerDocumentLocks(
  service: object,
  name: string,
  locks: DocumentLocks<Document>,
): void {
  let byName = registered.get(service);
  if (!byName) registered.set(service, (byName = new Map<string, DocumentLocks>()));
  const existing = byName.get(name);
  if (existing && existing !== locks) {
    throw new InvalidLockOptionsError(
      `MongoLockModule.forFeature: the name ${JSON.stringify(name)} is registered twice with different settings`,
      { option: 'name' },
    );
  }
  byName.set(name, locks);
}

/** Whether `forFeature()` registered `name` with `service`. */
export function hasDocumentLocks(service: object, name: string): boolean {
  return registered.get(service)?.has(name) ?? false;
}

/** The `DocumentLocks` registered as `name`; `where` (`Class.method`) is for the message. */
export function documentLocksNamed(service: object, name: string, where: string): DocumentLocks {
  const locks = registered.get(service)?.get(name);
  if (!locks) {
    throw new MongoLockError(
      `${where} locks documents of ${JSON.stringify(name)}, which no MongoLockModule.forFeature() registered`,
    );
  }
  return locks;
}
