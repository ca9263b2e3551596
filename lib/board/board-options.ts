import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import type { MongoLockBoardOptions } from './board-options.interface';
import { BOARD_MESSAGES } from './board.messages';

/** The board's options, checked, with defaults. */
export interface ResolvedBoardOptions {
  /** Without leading or trailing slashes. */
  path: string;
  guard: NonNullable<MongoLockBoardOptions['guard']> | undefined;
  allowRelease: boolean;
}

/**
 * Only plain path segments: no route parameters (`:`), wildcards, encoded characters, or
 * segments of dots only (`..`).
 */
const SEGMENT = String.raw`(?!\.+(?:/|$))[A-Za-z0-9._~-]+`;
const SAFE_PATH = new RegExp(`^${SEGMENT}(?:/${SEGMENT})*$`);

/** Checks the options when the module is built: a bad board never starts. */
export function resolveBoardOptions(options: MongoLockBoardOptions = {}): ResolvedBoardOptions {
  const rawPath = options.path ?? 'locks';
  const path = typeof rawPath === 'string' ? rawPath.replace(/^\/+|\/+$/g, '') : rawPath;
  if (typeof path !== 'string' || !SAFE_PATH.test(path)) {
    throw new InvalidLockOptionsError(BOARD_MESSAGES.badPath(rawPath), { option: 'path' });
  }
  const { guard } = options;
  const isGuard =
    guard === undefined ||
    typeof guard === 'function' ||
    (typeof guard === 'object' && guard !== null && typeof guard.canActivate === 'function');
  if (!isGuard) throw new InvalidLockOptionsError(BOARD_MESSAGES.badGuard(), { option: 'guard' });
  const allowRelease = options.allowRelease === true;
  if (allowRelease && guard === undefined) {
    throw new InvalidLockOptionsError(BOARD_MESSAGES.releaseNeedsGuard(), {
      option: 'allowRelease',
    });
  }
  return { path, guard, allowRelease };
}
