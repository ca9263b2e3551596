import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { describeNonString, LONE_SURROGATE } from './keys/lock-key';

/**
 * Each check returns the value (or the fallback when undefined), or throws
 * {@link InvalidLockOptionsError} naming the option, what it accepts and what it got.
 */

export function fail(option: string, expected: string, value: unknown): never {
  throw new InvalidLockOptionsError(`${option} must be ${expected}, got ${describeValue(value)}`, {
    option,
  });
}

/** A module's `isGlobal`: Nest makes the module global for any truthy value (`'no'` too). */
export function checkIsGlobal({ isGlobal }: { isGlobal?: unknown }): void {
  if (isGlobal !== undefined && typeof isGlobal !== 'boolean') {
    fail('isGlobal', 'true or false', isGlobal);
  }
}

/** A value as an error message shows it: strings quoted and cut, objects by their kind. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 64));
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return typeof value === 'bigint' ? `${value}n` : describeNonString(value);
}

/**
 * A `uri` that is not a MongoDB connection string, as a message may show it: its scheme at most,
 * never the rest, which can carry a password.
 */
export function describeBadUri(uri: unknown): string {
  if (typeof uri !== 'string') return describeValue(uri);
  if (uri === '') return 'an empty string';
  const scheme = /^[a-z][a-z0-9+.-]{0,20}:\/\//i.exec(uri)?.[0];
  return scheme
    ? `one starting with "${scheme}" (the rest is not shown: it can carry a password)`
    : 'one without a scheme (not shown: it can carry a password)';
}

/**
 * A call's options: none (undefined or null) is `{}`; anything but an object is refused, and so
 * are names outside `names` when given.
 */
export function optionsObject<T extends object>(
  value: T | null | undefined,
  names?: readonly string[],
): T {
  const given = value ?? ({} as T);
  if (typeof given !== 'object' || Array.isArray(given)) fail('options', 'an object', given);
  if (names) refuseUnknownOptions(given, names);
  return given;
}

export function integer(
  option: string,
  value: unknown,
  min: number,
  max: number,
  fallback: number,
) {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(option, `an integer from ${min} to ${max}`, value);
  }
  return value;
}

/** A callback the call runs (`withLock`'s work): refused before anything is written. */
export function callback(name: string, value: unknown): void {
  if (typeof value !== 'function') fail(name, 'a function', value);
}

export function ratio(option: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !(value > 0 && value < 1)) {
    fail(option, 'a number greater than 0 and less than 1', value);
  }
  return value;
}

export function boolean(option: string, value: unknown, fallback: boolean): boolean;
export function boolean(option: string, value: unknown, fallback: undefined): boolean | undefined;
export function boolean(option: string, value: unknown, fallback: boolean | undefined) {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') fail(option, 'true or false', value);
  return value;
}

export function name(option: string, value: unknown, forbidden: RegExp, maxLength: number) {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) {
    fail(option, `a non-empty string of at most ${maxLength} characters`, value);
  }
  if (forbidden.test(value)) fail(option, `a name without ${String(forbidden)}`, value);
  if (LONE_SURROGATE.test(value)) fail(option, 'well-formed Unicode (no lone surrogate)', value);
  return value;
}

/** Edit distance, case ignored: a misspelt option is usually a letter or a case off. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let previous = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) {
      row[j] = Math.min(
        previous[j] + 1,
        row[j - 1] + 1,
        previous[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1),
      );
    }
    previous = row;
  }
  return previous[y.length];
}

/** The known name closest to `option`, if it is close enough to be a slip. */
function closestName(option: string, names: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(option.length / 3)) + 1;
  for (const candidate of names) {
    const d = distance(option, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

/** Refuses option names the module does not know: a misspelt one would be ignored silently. */
export function refuseUnknownOptions(options: object, names: readonly string[], prefix = ''): void {
  for (const option of Object.keys(options)) {
    if (names.includes(option)) continue;
    const closest = closestName(option, names);
    const hint = closest === undefined ? '' : ` (did you mean ${prefix}${closest}?)`;
    throw new InvalidLockOptionsError(
      `${prefix}${option} is not an option${hint}; the options are ${names.map((name) => prefix + name).join(', ')}`,
      { option: prefix + option },
    );
  }
}

/** Characters MongoDB refuses in a database name (of at most 63). */
export const DB_NAME_FORBIDDEN = /[/\\. "$\0]/;

/** What MongoDB refuses in a collection name: `system.` and `.` at its start, `$` and NUL. */
export const COLLECTION_NAME_FORBIDDEN = /^system\.|^\.|[$\0]/;

function isNamed(value: unknown, maxLength: number, forbidden: RegExp): value is string {
  const { length } = typeof value === 'string' ? value : '';
  return length > 0 && length <= maxLength && !forbidden.test(value as string);
}

/** A database name MongoDB takes: 1 to 63 characters, none of {@link DB_NAME_FORBIDDEN}. */
export function isDatabaseName(value: unknown): value is string {
  return isNamed(value, 63, DB_NAME_FORBIDDEN);
}

/** A collection name MongoDB takes, of at most `maxLength` characters. */
export function isCollectionName(value: unknown, maxLength: number): value is string {
  return isNamed(value, maxLength, COLLECTION_NAME_FORBIDDEN);
}
