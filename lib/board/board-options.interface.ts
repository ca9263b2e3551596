import type { CanActivate, Type } from '@nestjs/common';

/** Options of `MongoLockBoardModule.forRoot()`. */
export interface MongoLockBoardOptions {
  /**
   * Where the board is served, below the app's global prefix: the page at `/{path}`, the JSON
   * API under `/{path}/api`. Letters, digits and `. _ ~ - /` only. Default `'locks'`.
   */
  path?: string;
  /**
   * A Nest guard (a class, resolved in the board's module, or an instance) run before every
   * route of the board. The `request.user` it leaves names the requester in the release log.
   */
  guard?: Type<CanActivate> | CanActivate;
  /**
   * Serve `POST /{path}/api/lock/release?key=…`, which frees a key whoever holds it. Default
   * `false` (the route is a 404). Needs a `guard`: `forRoot` throws without one.
   */
  allowRelease?: boolean;
  /**
   * Lifetime of one event-stream connection, in ms (1,000 to 3,600,000; default 60,000). The
   * page then reconnects through the guard, so revoked access stops the events within this time.
   */
  eventStreamMaxMs?: number;
}
