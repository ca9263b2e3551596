import { createParamDecorator } from '@nestjs/common';
import { currentDocumentLock, LOCKED_DOC_PARAMS, lockedDocParams } from './document-lock-context';

const handlerParam = createParamDecorator(() => currentDocumentLock());

/**
 * Injects the `DocumentLockHandle` of the `@LockedDocument` lock the method runs under: its
 * `doc`, `created`, `update()`, `commit()`, `fence`, `signal`... Works on controller handler
 * parameters and on parameters of `@LockedDocument` provider methods (the argument the caller
 * passes there is replaced). `undefined` when the call is not under a document lock (for
 * instance with the module's `enabled: false`).
 *
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
