import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { boolean, optionsObject } from '../option-checks';
import type { MongoLockBoardOptions } from './board-options.interface';
import { BOARD_MESSAGES } from './board.messages';

/** The board's options, checked, with defaults; `path` without leading or trailing slashes. */
export type ResolvedBoardOptions = Required<Omit<MongoLockBoardOptions, 'guard'>> &
  Pick<MongoLockBoardOptions, 'guard'>;

/** Plain segments only: no route parameters (`:`), wildcards, escapes, or all-dot segments. */
const SEGMENT = String.raw`(?!\.+(?:/|$))[A-Za-z0-9._~-]+`;
const SAFE_PATH = new RegExp(`^${SEGMENT}(?:/${SEGMENT})*$`);

/** Throws `InvalidLockOptionsError` when the module is built: a bad board never starts. */
export function resolveBoardOptions(given?: MongoLockBoardOptions | null): ResolvedBoardOptions {
  // A misspelt guard (`gaurd`, `guards`) would serve the board to everyone: refused, like a typo.
  const options = optionsObject(given, ['path', 'guard', 'allowRelease', 'eventStreamMaxMs']);
  const rawPath = options.path ?? 'locks';
  const path = typeof rawPath === 'string' ? rawPath.replace(/^\/+|\/+$/g, '') : rawPath;
  if (typeof path !== 'string' || !SAFE_PATH.test(path)) {
    throw new InvalidLockOptionsError(BOARD_MESSAGES.badPath(rawPath), { option: 'path' });
  }
  const { guard } = options;
  const isGuard =
    guard === undefined ||
    // A class (its `canActivate` may be a field: only an instance shows it), not an arrow or
    // bound function, which Nest cannot create.
    (typeof guard === 'function' && guard.prototype !== undefined) ||
    (typeof guard === 'object' && guard !== null && typeof guard.canActivate === 'function');
  if (!isGuard) throw new InvalidLockOptionsError(BOARD_MESSAGES.badGuard(), { option: 'guard' });
  const allowRelease = boolean('allowRelease', options.allowRelease, false);
  if (allowRelease && guard === undefined) {
    throw new InvalidLockOptionsError(BOARD_MESSAGES.releaseNeedsGuard(), {
      option: 'allowRelease',
    });
  }
  const eventStreamMaxMs = options.eventStreamMaxMs ?? 60_000;
  if (
    !Number.isInteger(eventStreamMaxMs) ||
    eventStreamMaxMs < 1_000 ||
    eventStreamMaxMs > 3_600_000
  ) {
    throw new InvalidLockOptionsError(BOARD_MESSAGES.badEventStreamMaxMs(eventStreamMaxMs), {
      option: 'eventStreamMaxMs',
    });
  }
  return { path, guard, allowRelease, eventStreamMaxMs };
}
