import { type DynamicModule, Module } from '@nestjs/common';
import type { MongoLockBoardOptions } from './board-options.interface';
import { resolveBoardOptions } from './board-options';
import { boardControllerFor, MONGO_LOCK_BOARD_OPTIONS } from './lock-board.controller';

/**
 * The lock board: a page and a JSON API that show the lock collection's keys, holders and
 * waiters, live. It uses the app's `LockService`, so `MongoLockModule` must be imported too.
 * Options are checked here: `allowRelease` without a `guard` throws `InvalidLockOptionsError`.
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
    return {
      module: MongoLockBoardModule,
      controllers: [boardControllerFor(resolved)],
      providers: [{ provide: MONGO_LOCK_BOARD_OPTIONS, useValue: resolved }],
    };
  }
}
