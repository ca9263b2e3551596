import { Inject, Injectable } from '@nestjs/common';
import type { CanActivate, ExecutionContext, Provider, Type } from '@nestjs/common';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { BOARD_MESSAGES } from './board.messages';

/**
 * The application's guard behind one of the board's own, which checks at start-up that it is a
 * guard: Nest 10 skips a guard instance without `canActivate`, which would serve the board (and
 * its release) to everyone. A guard class is made in the board's module, as before.
 */
export function boardGuard(guard: Type<CanActivate> | CanActivate): {
  guard: Type<CanActivate>;
  provider: Provider;
} {
  const token = Symbol('MONGO_LOCK:BOARD_GUARD');
  @Injectable()
  class MongoLockBoardGuard implements CanActivate {
    constructor(@Inject(token) private readonly inner: Partial<CanActivate>) {
      if (typeof inner.canActivate !== 'function') {
        throw new InvalidLockOptionsError(BOARD_MESSAGES.badGuard(), { option: 'guard' });
      }
    }

    canActivate(context: ExecutionContext) {
      return this.inner.canActivate!(context);
    }
  }
  const provider =
    typeof guard === 'function'
      ? { provide: token, useClass: guard }
      : { provide: token, useValue: guard };
  return { guard: MongoLockBoardGuard, provider };
}
