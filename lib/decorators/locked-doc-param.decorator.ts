import { createParamDecorator } from '@nestjs/common';
import { currentDocumentLock, LOCKED_DOC_PARAMS, lockedDocParams } from './document-lock-context';

const handlerParam = createParamDecorator(() => currentDocumentLock());

/**
 * Injects the `DocumentLockHandle` of the `@LockedDocument` lock the method runs under (`doc`,
 * `update()`, `commit()`, `fence`...), on handlers and on provider methods (replacing the
 * caller's argument); `undefined` when not under a document lock (as with `enabled: false`).
 * @example
 * \@Post(':id/withdraw')
 * \@LockedDocument('accounts', '{params.id}')
 * withdraw(@Body() body: { amount: number }, @LockedDoc() lock: DocumentLockHandle<Account>) {
 *   if (lock.doc.balance < body.amount) throw new ConflictException('insufficient funds');
 *   return lock.commit({ $inc: { balance: -body.amount } });
 * }
 */
export function LockedDoc(): ParameterDecorator {
  return (target, propertyKey, index) => {
    if (propertyKey === undefined) return; // a constructor parameter: nothing to lock
    handlerParam()(target, propertyKey, index);
    const indexes = [...lockedDocParams(target, propertyKey), index];
    Reflect.defineMetadata(LOCKED_DOC_PARAMS, indexes, target, propertyKey);
  };
}
