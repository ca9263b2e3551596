import { type DynamicModule, Module } from '@nestjs/common';
import type { MongoLockBoardOptions } from './board-options.interface';
import { boardGuard } from './board-guard';
import { resolveBoardOptions } from './board-options';
import { boardControllerFor, MONGO_LOCK_BOARD_OPTIONS } from './lock-board.controller';

/**
 * A live page and JSON API over the lock keys, holders and waiters; needs `MongoLockModule` too.
 * `forRoot` throws `InvalidLockOptionsError` on bad options (e.g. `allowRelease` without `guard`).
 *
 * @example
 * \@Module({
 *   imports: [
 *     MongoLockModule.forRoot({ uri: process.env.MONGODB_URI }),
 *     MongoLockBoardModule.forRoot({ path: 'ops/locks', guard: AdminGuard, allowRelease: true }),
 *   ],
 * })
 * export class AppModule {}
 */
@Module({})
export class MongoLockBoardModule {
  static forRoot(options: MongoLockBoardOptions = {}): DynamicModule {
    const resolved = resolveBoardOptions(options);
    const guarded = resolved.guard && boardGuard(resolved.guard);
    return {
      module: MongoLockBoardModule,
      controllers: [boardControllerFor(resolved, guarded?.guard)],
      providers: [
        { provide: MONGO_LOCK_BOARD_OPTIONS, useValue: resolved },
        ...(guarded ? [guarded.provider] : []),
      ],
    };
  }
}
