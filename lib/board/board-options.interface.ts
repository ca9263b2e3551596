import type { CanActivate, Type } from '@nestjs/common';

/**
 * What `MongoLockBoardModule.forRoot()` takes.
 *
 * @example
 * MongoLockBoardModule.forRoot({ path: 'ops/locks', guard: AdminGuard, allowRelease: true });
 */
export interface MongoLockBoardOptions {
  /**
   * Where the board is served, below the app's global prefix: the page at `/{path}`, the JSON
   * API under `/{path}/api`. Letters, digits and `. _ ~ - /` only. Default `'locks'`.
   */
  path?: string;
  /**
   * A Nest guard (a class, resolved in the board's module, or an instance) that runs before
   * every route of the board: the page, the JSON API, the event stream and the release. What
   * it leaves on the request (`request.user`) names who asked for a release in the log.
   */
  guard?: Type<CanActivate> | CanActivate;
  /**
   * Serve `POST /{path}/api/lock/release?key=…`, which frees a key whoever holds it. Needs a
   * `guard`: `forRoot` throws without one. When `false` (the default) the route does not exist
   * (404).
   */
  allowRelease?: boolean;
  /**
   * How long one connection of the event stream lasts, in ms. Then it ends and the page
   * reconnects, through the guard again: an operator whose access ends stops receiving events
   * within this time. From 1,000 to 3,600,000. Default 60,000.
   */
  eventStreamMaxMs?: number;
}
