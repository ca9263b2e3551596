import { createParamDecorator } from '@nestjs/common';
import { LockService } from '../lock.service';

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
