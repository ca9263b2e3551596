import { createParamDecorator } from '@nestjs/common';
import { LockService } from '../lock.service';

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
