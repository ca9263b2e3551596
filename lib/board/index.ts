// `nestjs-mongo-lock/board`: the lock board, an HTTP module the main entry never loads.
/**
 * The lock board: a self-contained page and a JSON API over the app's `LockService`.
 *
 * @module nestjs-mongo-lock/board
 */
export { MongoLockBoardModule } from './mongo-lock-board.module';
export type { MongoLockBoardOptions } from './board-options.interface';
export type {
  BoardEventJson,
  BoardHolderJson,
  BoardLockJson,
  BoardLockPageJson,
  BoardReleaseJson,
} from './board-json';
