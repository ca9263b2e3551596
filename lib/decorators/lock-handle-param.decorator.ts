import { createParamDecorator } from '@nestjs/common';
import { LockService } from '../lock.service';

/**
 * Injects the `LockHandle` of the lock a `@Locked` handler runs under (its `fence`, `signal`,
 * `expiresAt`...). `undefined` when the handler is not locked. Same as `LockService.current()`.
 *
 * @example
 * \@Post(':id/pay')
 * \@Locked('order:{params.id}')
 * pay(@Param('id') id: string, @LockHandleParam() lock: LockHandle) {
 *   return this.payments.charge(id, { fence: lock.fence, signal: lock.signal });
 * }
 */
export const LockHandleParam = createParamDecorator(() => LockService.current());
