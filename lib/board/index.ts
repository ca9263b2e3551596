/**
 * The lock board, a separate entry: a self-contained page and JSON API over `LockService`.
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
