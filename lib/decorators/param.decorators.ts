import { createParamDecorator } from '@nestjs/common';
import { LockService } from '../lock.service';
import { documentLockContext } from './lock-bindings';

/**
 * Injects the `LockHandle` a `@Locked` handler runs under (`fence`, `signal`, `expiresAt`...),
 * as `LockService.current()` gives it; `undefined` when the handler is not locked.
 * @example
 * \@Post(':id/pay')
 * \@Locked('order:{params.id}')
 * pay(@Param('id') id: string, @LockHandleParam() lock: LockHandle) {
 *   return this.payments.charge(id, { fence: lock.fence, signal: lock.signal });
 * }
 */
export const LockHandleParam = createParamDecorator(() => LockService.current());

/**
 * Injects the MongoDB session of a `@Locked(…, { transaction: true })` handler's transaction,
 * for every command of the protected work; `undefined` without a transaction. In provider
 * methods, read `LockService.current()?.session`.
 * @example
 * \@Post(':id/pay')
 * \@Locked('order:{params.id}', { transaction: true })
 * pay(@Param('id') id: string, @LockSession() session: ClientSession) {
 *   return this.orders.updateOne({ _id: id }, { $set: { paid: true } }, { session });
 * }
 */
export const LockSession = createParamDecorator(() => LockService.current()?.session);

/** Metadata key: the indexes of a method's `@LockedDoc()` parameters. */
const LOCKED_DOC_PARAMS = 'MONGO_LOCK:LOCKED_DOC_PARAMS';

export function lockedDocParams(target: object, propertyKey: string | symbol): readonly number[] {
  return (Reflect.getOwnMetadata(LOCKED_DOC_PARAMS, target, propertyKey) as number[]) ?? [];
}

const handlerParam = createParamDecorator(() => documentLockContext.getStore());

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
