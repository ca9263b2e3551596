import { AsyncLocalStorage } from 'node:async_hooks';
import type { DocumentLockHandle } from '../documents/document-lock-handle';

/** The handle of the `@LockedDocument` call the current async context runs in. */
const current = new AsyncLocalStorage<DocumentLockHandle>();

export function runWithDocumentLock<T>(handle: DocumentLockHandle, run: () => T): T {
  return current.run(handle, run);
}

/** The innermost `@LockedDocument` handle (still given after a `commit`), or `undefined`. */
export function currentDocumentLock(): DocumentLockHandle | undefined {
  return current.getStore();
}

/** Metadata key: the indexes of a method's `@LockedDoc()` parameters. */
export const LOCKED_DOC_PARAMS = 'MONGO_LOCK:LOCKED_DOC_PARAMS';

export function lockedDocParams(target: object, propertyKey: string | symbol): readonly number[] {
  return (Reflect.getOwnMetadata(LOCKED_DOC_PARAMS, target, propertyKey) as number[]) ?? [];
}
