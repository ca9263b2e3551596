import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { MongoClient } from 'mongodb';
import { EXCLUSIVE, MAX_HOLDERS_PER_KEY } from './store/lock-modes';
import type { LockModeRequest } from './store/lock-modes';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import type { AcquireOptions } from './interfaces/lock-options.interface';
import { LONE_SURROGATE } from './keys/lock-key';
import {
  boolean,
  COLLECTION_NAME_FORBIDDEN,
  DB_NAME_FORBIDDEN,
  describeBadUri,
  fail,
  integer,
  name,
  optionsObject,
  ratio,
  refuseUnknownOptions,
} from './option-checks';
import type {
  LockRenewalOptions,
  MongoLockModuleOptions,
} from './interfaces/mongo-lock-options.interface';
import { keepUriClient, readConnectionString } from './store/connection-string';
import { MAX_TIMER_MS } from './util/timers';

/** Shortest lease: shorter ones cannot survive one renewal round trip under load. */
export const MIN_TTL_MS = 1_000;

/**
 * How long past `timeoutMs` an acquisition waits for a reply still on its way: 1 s, or
 * `operationTimeoutMs` if shorter. Later ones settle in the background (a late win is given back).
 */
export function acquireOverrunMs(operationTimeoutMs: number): number {
  return Math.min(operationTimeoutMs, 1_000);
}

const MAX_IDLE_RETENTION_MS = 365 * 24 * 60 * 60 * 1000;

export const LOCK_OPTION_DEFAULTS = {
  collectionName: 'locks',
  defaultTtlMs: 30_000,
  defaultTimeoutMs: 10_000,
  renewalIntervalRatio: 1 / 3,
  maxHoldMs: 10 * 60 * 1000,
  idleRetentionMs: 24 * 60 * 60 * 1000,
  ensureIndexes: true,
  engine: 'v2',
  changeStreams: 'auto',
  localHandOff: true,
  pollIntervalMs: 50,
  maxPollIntervalMs: 1_000,
  safetyPollIntervalMs: 5_000,
  operationTimeoutMs: 5_000,
  shutdownGraceMs: 10_000,
  enabled: true,
} as const;

/** Module options with every default filled in. Exactly one of `uri` and `client` is set. */
export type ResolvedLockModuleOptions = Required<
  Omit<MongoLockModuleOptions, 'uri' | 'client' | 'dbName' | 'renewal' | 'engine'>
> & {
  uri: string | undefined;
  client: MongoClient | undefined;
  dbName: string | undefined;
  /** `undefined` = per method (`withLock` renews, `acquire` does not). */
  renewalEnabled: boolean | undefined;
  renewalIntervalRatio: number;
};

/** One acquisition's options with the module defaults applied. */
export interface ResolvedAcquireOptions {
  ttlMs: number;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  renew: boolean;
  renewalIntervalRatio: number;
  metricsLabel: string;
  scope: string | undefined;
  /** Exclusive, shared, or a semaphore's permits. */
  mode: LockModeRequest;
  /** Overrides the module's `maxHoldMs` (`Infinity` for a leader's term, held while renewed). */
  maxHoldMs?: number;
  /**
   * `false`: no hand-over here (`localHandOff`) to or from this acquisition. A leader's term: a
   * candidate that resigns and stands again goes to the back of the line.
   */
  handOff?: false;
  /** Told once if the first join's reply leaves the call waiting (a leader's election). */
  queued?: () => void;
}

/**
 * A holder id goes into the lock's update pipelines as a value: `$` would make it a path. `*`,
 * `!` and `?` start the leads meant for every process (`line-events.ts`).
 */
export function holderIdOption(value: unknown): string | undefined {
  const id = name('holderId', value, /\0/, 200);
  if (id && /^[$*!?]/.test(id)) fail('holderId', 'an id that does not start with $, *, ! or ?', id);
  return id;
}

/** The connection options, and the client the driver made as it read `uri`. */
function connection(
  options: MongoLockModuleOptions,
): Pick<ResolvedLockModuleOptions, 'uri' | 'client'> & { uriClient?: MongoClient } {
  const { uri, client } = options;
  // Options read from configuration often carry the other one as null: say what it is.
  if (uri !== undefined && client === null) fail('client', 'a MongoClient, or undefined', null);
  if (client !== undefined && uri === null) fail('uri', 'a connection string, or undefined', null);
  if ((uri === undefined) === (client === undefined)) {
    // Never echo the value: a connection string can carry a password.
    throw new InvalidLockOptionsError(
      uri === undefined
        ? 'Give exactly one of uri (a connection string) and client (a MongoClient), got ' +
            'neither (a uri read from an unset environment variable is undefined)'
        : 'Give exactly one of uri (a connection string) and client (a MongoClient), got both',
      { option: 'uri' },
    );
  }
  if (uri !== undefined && (typeof uri !== 'string' || !/^mongodb(\+srv)?:\/\//.test(uri))) {
    throw new InvalidLockOptionsError(
      'uri must be a string starting with mongodb:// or mongodb+srv:// (e.g. ' +
        `mongodb://localhost:27017), got ${describeBadUri(uri)}`,
      { option: 'uri' },
    );
  }
  const read = uri === undefined ? undefined : readConnectionString(uri);
  if (read instanceof Error) {
    // The driver's reason names the option or part, not the credentials.
    throw new InvalidLockOptionsError(
      `uri is not a connection string the driver can read: ${read.message}`,
      { option: 'uri', cause: read },
    );
  }
  if (client !== undefined && typeof (client as { db?: unknown } | null)?.db !== 'function') {
    fail('client', 'a MongoClient', client);
  }
  return { uri, client, uriClient: read };
}

/** The module's `renewal` or a call's `renew` given as an object, its names checked. */
function renewalObject(option: string, value: unknown, expected: string): LockRenewalOptions {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(option, expected, value);
  }
  refuseUnknownOptions(value, RENEWAL_OPTION_NAMES, `${option}.`);
  return value;
}

// `satisfies` makes the compiler check these against the interfaces: add new options here too.
const MODULE_OPTION_NAMES = Object.keys({
  uri: true,
  client: true,
  dbName: true,
  collectionName: true,
  defaultTtlMs: true,
  defaultTimeoutMs: true,
  renewal: true,
  maxHoldMs: true,
  holderId: true,
  idleRetentionMs: true,
  ensureIndexes: true,
  engine: true,
  changeStreams: true,
  localHandOff: true,
  pollIntervalMs: true,
  maxPollIntervalMs: true,
  safetyPollIntervalMs: true,
  operationTimeoutMs: true,
  shutdownGraceMs: true,
  enabled: true,
} satisfies Record<keyof MongoLockModuleOptions, true>);

const RENEWAL_OPTION_NAMES = Object.keys({
  enabled: true,
  intervalRatio: true,
} satisfies Record<keyof LockRenewalOptions, true>);

/** The module options that are whole numbers of milliseconds: those named `…Ms`. */
type IntegerOption = Extract<keyof MongoLockModuleOptions, `${string}Ms`>;

function defaultHolderId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** Validates the module options and fills in defaults; throws on the first bad one. */
export function resolveModuleOptions(options: MongoLockModuleOptions): ResolvedLockModuleOptions {
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  refuseUnknownOptions(options, MODULE_OPTION_NAMES);
  const d = LOCK_OPTION_DEFAULTS;
  const int = (name: IntegerOption, min: number, max: number, fallback: number = d[name]) =>
    integer(name, options[name], min, max, fallback);
  const renew =
    options.renewal === undefined ? {} : renewalObject('renewal', options.renewal, 'an object');
  const pollIntervalMs = int('pollIntervalMs', 1, 60_000);
  const changeStreams = options.changeStreams ?? d.changeStreams;
  if (changeStreams !== 'auto' && changeStreams !== 'off') {
    fail('changeStreams', "'auto' or 'off'", changeStreams);
  }
  const engine = options.engine ?? d.engine;
  if ((engine as string) === 'v1') {
    throw new InvalidLockOptionsError(
      "engine 'v1' (0.1's protocol) is removed: this version runs engine 'v2' only, on the " +
        'collection <collectionName>_line. Stop every 0.1 process before starting this version ' +
        '(see docs/upgrading.md)',
      { option: 'engine' },
    );
  }
  if (engine !== 'v2') fail('engine', "'v2'", engine);
  const { uri, client, uriClient } = connection(options);
  // The database the uri names, unless dbName replaces it: refused now, not at the first write.
  if (options.dbName === undefined && uriClient) {
    name('uri', uriClient.options.dbName, DB_NAME_FORBIDDEN, 63);
  }
  const resolved: ResolvedLockModuleOptions = {
    uri,
    client,
    dbName: name('dbName', options.dbName, DB_NAME_FORBIDDEN, 63),
    collectionName:
      name('collectionName', options.collectionName, COLLECTION_NAME_FORBIDDEN, 120) ??
      d.collectionName,
    defaultTtlMs: int('defaultTtlMs', MIN_TTL_MS, MAX_TIMER_MS),
    defaultTimeoutMs: int('defaultTimeoutMs', 0, MAX_TIMER_MS),
    renewalEnabled: boolean('renewal.enabled', renew.enabled, undefined),
    renewalIntervalRatio: ratio(
      'renewal.intervalRatio',
      renew.intervalRatio,
      d.renewalIntervalRatio,
    ),
    maxHoldMs: int('maxHoldMs', MIN_TTL_MS, MAX_TIMER_MS),
    holderId: holderIdOption(options.holderId) ?? defaultHolderId(),
    idleRetentionMs: int('idleRetentionMs', 0, MAX_IDLE_RETENTION_MS),
    ensureIndexes: boolean('ensureIndexes', options.ensureIndexes, d.ensureIndexes),
    localHandOff: boolean('localHandOff', options.localHandOff, d.localHandOff),
    changeStreams,
    pollIntervalMs,
    maxPollIntervalMs: int(
      'maxPollIntervalMs',
      pollIntervalMs,
      600_000,
      Math.max(d.maxPollIntervalMs, pollIntervalMs),
    ),
    safetyPollIntervalMs: int('safetyPollIntervalMs', 100, MAX_TIMER_MS),
    operationTimeoutMs: int('operationTimeoutMs', 100, 600_000),
    shutdownGraceMs: int('shutdownGraceMs', 0, MAX_TIMER_MS),
    enabled: boolean('enabled', options.enabled, d.enabled),
  };
  if (uriClient) keepUriClient(resolved, uriClient);
  return resolved;
}

const ACQUIRE_OPTION_NAMES = Object.keys({
  ttlMs: true,
  timeoutMs: true,
  signal: true,
  renew: true,
  metricsLabel: true,
  scope: true,
  mode: true,
  permits: true,
  weight: true,
} satisfies Record<keyof AcquireOptions, true>);

/**
 * Validates one call's options, filling in the module defaults. `renewByDefault`: the method's
 * own (`withLock`: true, `acquire`: false), used when neither the call nor the module says.
 * `moreNames`: the options the method takes beyond an acquisition's (others are refused).
 */
export function resolveAcquireOptions(
  options: AcquireOptions | undefined,
  defaults: ResolvedLockModuleOptions,
  renewByDefault: boolean,
  moreNames: readonly string[] = [],
): ResolvedAcquireOptions {
  const given = optionsObject(options);
  // An option left undefined (spread from an optional field) is no option.
  const named = Object.fromEntries(
    Object.entries(given).filter(([, value]) => value !== undefined),
  );
  refuseUnknownOptions(named, [...ACQUIRE_OPTION_NAMES, ...moreNames]);
  const signal = given.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal))
    fail('signal', 'an AbortSignal', signal);
  const { renew, renewalIntervalRatio } = resolveRenewOption(
    given.renew,
    defaults.renewalEnabled ?? renewByDefault,
    defaults.renewalIntervalRatio,
  );
  return {
    ttlMs: integer('ttlMs', given.ttlMs, MIN_TTL_MS, MAX_TIMER_MS, defaults.defaultTtlMs),
    timeoutMs: integer('timeoutMs', given.timeoutMs, 0, MAX_TIMER_MS, defaults.defaultTimeoutMs),
    signal,
    renew,
    renewalIntervalRatio,
    metricsLabel: metricsLabel(given.metricsLabel),
    scope: scopeName(given.scope),
    mode: lockMode(given),
  };
}

/** `mode`, `permits` and `weight` of one acquisition. */
export function lockMode(given: AcquireOptions): LockModeRequest {
  const { mode = 'exclusive', permits, weight } = given;
  if (mode !== 'exclusive' && mode !== 'shared') fail('mode', "'exclusive' or 'shared'", mode);
  if (permits === undefined) {
    if (weight !== undefined) fail('weight', 'given only with permits', weight);
    return mode === 'exclusive' ? EXCLUSIVE : { mode, permits: undefined, weight: 1 };
  }
  if (given.mode !== undefined)
    fail('mode', 'left out with permits (a semaphore has no mode)', mode);
  const count = integer('permits', permits, 1, MAX_HOLDERS_PER_KEY, 1);
  return { mode: 'shared', permits: count, weight: integer('weight', weight, 1, count, 1) };
}

/** Telemetry labels are bounded: they become attribute values on every instrument. */
export const MAX_METRICS_LABEL_LENGTH = 200;

/** `'(direct)'` for acquisitions that name none (`LockService` called directly). */
function metricsLabel(value: unknown): string {
  if (value === undefined) return '(direct)';
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_METRICS_LABEL_LENGTH) {
    fail('metricsLabel', `a string of 1 to ${MAX_METRICS_LABEL_LENGTH} characters`, value);
  }
  return value;
}

/** One call's `renew` option over the defaults given: whether it renews, and how often. */
export function resolveRenewOption(
  value: unknown,
  renew: boolean,
  renewalIntervalRatio: number,
): { renew: boolean; renewalIntervalRatio: number } {
  if (value === undefined) return { renew, renewalIntervalRatio };
  if (typeof value === 'boolean') return { renew: value, renewalIntervalRatio };
  const given = renewalObject('renew', value, 'true, false or renewal options');
  return {
    renew: boolean('renew.enabled', given.enabled, true),
    renewalIntervalRatio: ratio('renew.intervalRatio', given.intervalRatio, renewalIntervalRatio),
  };
}

/** `withLock`'s `transaction` option: `undefined` for none. */
export function resolveTransactionOption(value: unknown): { maxCommitTimeMS?: number } | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return {};
  const refuse = () => fail('transaction', 'true, false or { maxCommitTimeMS }', value);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) refuse();
  const { maxCommitTimeMS, ...rest } = value as Record<string, unknown>;
  if (Object.keys(rest).length > 0) refuse();
  if (maxCommitTimeMS === undefined) return {};
  return {
    maxCommitTimeMS: integer('transaction.maxCommitTimeMS', maxCommitTimeMS, 1, MAX_TIMER_MS, 0),
  };
}

/** The longest scope, in UTF-16 code units. */
export const MAX_SCOPE_LENGTH = 200;

/** An owner scope: a bounded string, as every other name the library stores. */
export function scopeName(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > MAX_SCOPE_LENGTH ||
    value.includes('\0') ||
    LONE_SURROGATE.test(value)
  ) {
    fail('scope', 'a string of 1 to 200 characters without NUL or a lone surrogate', value);
  }
  return value;
}

/** A wait in ms: 0 to the timer limit, or `undefined` (no bound) when not given. */
export function validateWaitMs(option: string, value: unknown): number | undefined {
  return value === undefined ? undefined : integer(option, value, 0, MAX_TIMER_MS, 0);
}

/** Checks a lease length given outside the option objects (`handle.extend(ttlMs)`). */
export function validateTtlMs(option: string, value: unknown): number {
  return integer(option, value, MIN_TTL_MS, MAX_TIMER_MS, LOCK_OPTION_DEFAULTS.defaultTtlMs);
}
