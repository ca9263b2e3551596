import { MongoClient } from 'mongodb';
import { InvalidLockOptionsError } from './errors';
import type { AcquireOptions } from './interfaces';
import { LOCK_OPTION_DEFAULTS, resolveAcquireOptions, resolveModuleOptions } from './options';

const uri = 'mongodb://localhost:27017/app';

describe('resolveModuleOptions', () => {
  it('fills in the documented defaults', () => {
    const resolved = resolveModuleOptions({ uri });
    expect(resolved).toMatchObject({
      uri,
      client: undefined,
      dbName: undefined,
      collectionName: 'locks',
      defaultTtlMs: 30_000,
      defaultTimeoutMs: 10_000,
      renewalEnabled: undefined,
      renewalIntervalRatio: 1 / 3,
      maxHoldMs: 600_000,
      idleRetentionMs: 86_400_000,
      ensureIndexes: true,
      changeStreams: 'auto',
      pollIntervalMs: 50,
      maxPollIntervalMs: 1_000,
      safetyPollIntervalMs: 5_000,
    });
    expect(resolved.holderId).toMatch(/^.+:\d+:[0-9a-f]{8}$/);
  });

  it('enabled: true by default, a boolean otherwise', () => {
    expect(resolveModuleOptions({ uri }).enabled).toBe(true);
    expect(resolveModuleOptions({ uri, enabled: false }).enabled).toBe(false);
    expect(() => resolveModuleOptions({ uri, enabled: 'no' as never })).toThrow(
      'enabled must be true or false, got "no"',
    );
  });

  it('gives each instance its own holder id', () => {
    expect(resolveModuleOptions({ uri }).holderId).not.toBe(resolveModuleOptions({ uri }).holderId);
  });

  it('accepts a client instead of a uri', () => {
    const client = new MongoClient(uri);
    expect(resolveModuleOptions({ client }).client).toBe(client);
  });

  it.each([
    [{}, /exactly one of uri .* got neither \(a uri read from an unset environment variable/],
    [{ uri, client: new MongoClient(uri) }, /got both/],
  ])('requires exactly one of uri and client (%#)', (options, message) => {
    expect(() => resolveModuleOptions(options)).toThrow(message);
  });

  it('never echoes a connection string, which can carry a password', () => {
    expect(() => resolveModuleOptions({ uri: 'postgres://user:secret@host' })).toThrow(
      'uri must be a string starting with mongodb:// or mongodb+srv:// (e.g. ' +
        'mongodb://localhost:27017), got one starting with "postgres://" (the rest is not shown: ' +
        'it can carry a password)',
    );
  });

  it.each([
    ['', 'got an empty string'],
    [
      'user:secret@localhost:27017',
      'got one without a scheme (not shown: it can carry a password)',
    ],
    ['user:secret@host://x', 'got one without a scheme'],
    [27017, 'got 27017'],
  ])('says what a uri that is not a connection string is, never its text (%#)', (bad, what) => {
    const error = capture(() => resolveModuleOptions({ uri: bad as string }));
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect(error).toMatchObject({ option: 'uri' });
    expect(error.message).toContain(what);
    expect(error.message).not.toContain('secret');
  });

  it.each([
    [
      'mongodb://user:secretpw@127.0.0.1/?directConection=true',
      /option directconection is not supported/,
    ],
    ['mongodb://user:secretpw@127.0.0.1/?readPreference=bogus', /Invalid read preference mode/],
    ['mongodb+srv://user:secretpw@h1,h2/', /multiple service names/],
  ])('refuses a uri the driver cannot read, with its reason and no password (%#)', (bad, why) => {
    const error = capture(() => resolveModuleOptions({ uri: bad }));
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect(error).toMatchObject({ option: 'uri', cause: expect.any(Error) });
    expect(error.message).toMatch(/^uri is not a connection string the driver can read: /);
    expect(error.message).toMatch(why);
    expect(error.message).not.toContain('secretpw');
  });

  it('accepts a uri with options the driver reads', () => {
    const good = 'mongodb+srv://user:pw@cluster0.example.net/app?retryWrites=true&w=majority';
    expect(resolveModuleOptions({ uri: good }).uri).toBe(good);
  });

  it.each([
    ['defaultTtlMs', -5, 'defaultTtlMs must be an integer from 1000 to 2147483647, got -5'],
    ['defaultTtlMs', 999, 'defaultTtlMs must be an integer from 1000 to 2147483647, got 999'],
    ['defaultTimeoutMs', 1.5, 'defaultTimeoutMs must be an integer from 0 to 2147483647, got 1.5'],
    ['maxHoldMs', '60000', 'maxHoldMs must be an integer from 1000 to 2147483647, got "60000"'],
    ['idleRetentionMs', -1, 'idleRetentionMs must be an integer from 0 to 31536000000, got -1'],
    ['pollIntervalMs', 0, 'pollIntervalMs must be an integer from 1 to 60000, got 0'],
    [
      'safetyPollIntervalMs',
      10,
      'safetyPollIntervalMs must be an integer from 100 to 2147483647, got 10',
    ],
    ['ensureIndexes', 'yes', 'ensureIndexes must be true or false, got "yes"'],
    ['changeStreams', 'on', `changeStreams must be 'auto' or 'off', got "on"`],
    ['engine', 'v3', `engine must be 'v2', got "v3"`],
    ['engine', 'v1', "engine 'v1' (0.1's protocol) is removed"],
    [
      'collectionName',
      '',
      'collectionName must be a non-empty string of at most 120 characters, got ""',
    ],
    ['collectionName', 'system.locks', 'collectionName must be a name without'],
    ['collectionName', '.locks', 'collectionName must be a name without'],
    ['renewal', [], 'renewal must be an object, got an array'],
    ['dbName', 'a.b', 'dbName must be a name without'],
    ['holderId', 42, 'holderId must be a non-empty string of at most 200 characters, got 42'],
    [
      'holderId',
      '$host',
      'holderId must be an id that does not start with $, *, ! or ?, got "$host"',
    ],
    [
      'holderId',
      '!host',
      'holderId must be an id that does not start with $, *, ! or ?, got "!host"',
    ],
    ['holderId', '?', 'holderId must be an id that does not start with $, *, ! or ?, got "?"'],
    [
      'holderId',
      '* host',
      'holderId must be an id that does not start with $, *, ! or ?, got "* host"',
    ],
    // Stored as UTF-8, a lone surrogate would come back as U+FFFD: another id.
    ['holderId', 'web-\uD800', 'holderId must be well-formed Unicode (no lone surrogate)'],
  ])('rejects %s = %p, naming the option and its range', (option, value, message) => {
    const error = capture(() => resolveModuleOptions({ uri, [option]: value }));
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect(error.message).toContain(message);
    expect((error as InvalidLockOptionsError).option).toBe(option);
  });

  it.each([
    ['defaultTTLMs', 'defaultTTLMs is not an option (did you mean defaultTtlMs?)'],
    ['ttlMs', 'ttlMs is not an option'],
    ['isGlobal', 'isGlobal is not an option'],
    ['colectionName', 'colectionName is not an option (did you mean collectionName?)'],
  ])('refuses the unknown option %s, naming it and the closest known name', (option, message) => {
    const error = capture(() => resolveModuleOptions({ uri, [option]: 60_000 }));
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect(error.message).toContain(message);
    expect(error.message).toContain('the options are uri, client, dbName');
    expect((error as InvalidLockOptionsError).option).toBe(option);
  });

  it('refuses an unknown renewal option, naming it', () => {
    const error = capture(() => resolveModuleOptions({ uri, renewal: { ratio: 0.5 } as never }));
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect(error.message).toContain('renewal.ratio is not an option');
    expect((error as InvalidLockOptionsError).option).toBe('renewal.ratio');
    expect(
      capture(() => resolveModuleOptions({ uri, renewal: { intervalratio: 0.5 } as never }))
        .message,
    ).toContain('(did you mean renewal.intervalRatio?)');
  });

  it('refuses an unknown renew option of one call, naming it', () => {
    const defaults = resolveModuleOptions({ uri });
    const error = capture(() =>
      resolveAcquireOptions({ renew: { intervalRation: 0.5 } as never }, defaults, true),
    );
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect(error.message).toContain('(did you mean renew.intervalRatio?)');
    expect(resolveAcquireOptions({ renew: { intervalRatio: 0.5 } }, defaults, false)).toMatchObject(
      { renew: true, renewalIntervalRatio: 0.5 },
    );
  });

  it.each([
    ['a.b', 'uri must be a name without'],
    ['a$b', 'uri must be a name without'],
    ['d'.repeat(64), 'uri must be a non-empty string of at most 63 characters'],
  ])(
    'refuses a uri naming database %p, as dbName is refused, unless dbName replaces it',
    (db, message) => {
      const named = `mongodb://localhost:27017/${db}`;
      const error = capture(() => resolveModuleOptions({ uri: named }));
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect(error.message).toContain(message);
      expect((error as InvalidLockOptionsError).option).toBe('uri');
      expect(resolveModuleOptions({ uri: named, dbName: 'app' }).dbName).toBe('app');
    },
  );

  it('checks the renewal options', () => {
    expect(() => resolveModuleOptions({ uri, renewal: { intervalRatio: 0 } })).toThrow(
      'renewal.intervalRatio must be a number greater than 0 and less than 1, got 0',
    );
    expect(() => resolveModuleOptions({ uri, renewal: { enabled: 1 as never } })).toThrow(
      'renewal.enabled must be true or false, got 1',
    );
  });

  it('keeps the polling cap at least the first interval', () => {
    expect(resolveModuleOptions({ uri, pollIntervalMs: 2_000 }).maxPollIntervalMs).toBe(2_000);
    expect(() =>
      resolveModuleOptions({ uri, pollIntervalMs: 500, maxPollIntervalMs: 100 }),
    ).toThrow('maxPollIntervalMs must be an integer from 500 to 600000, got 100');
  });
});

describe('resolveAcquireOptions', () => {
  const defaults = resolveModuleOptions({ uri });

  it('takes the module defaults and the method default for renewal', () => {
    expect(resolveAcquireOptions(undefined, defaults, false)).toEqual({
      ttlMs: LOCK_OPTION_DEFAULTS.defaultTtlMs,
      timeoutMs: LOCK_OPTION_DEFAULTS.defaultTimeoutMs,
      signal: undefined,
      renew: false,
      renewalIntervalRatio: 1 / 3,
      metricsLabel: '(direct)',
      scope: undefined,
      mode: { mode: 'exclusive', permits: undefined, weight: 1 },
    });
    expect(resolveAcquireOptions({}, defaults, true).renew).toBe(true);
  });

  it('takes a metricsLabel of 1 to 200 characters', () => {
    expect(resolveAcquireOptions({ metricsLabel: 'orders:{id}' }, defaults, false)).toMatchObject({
      metricsLabel: 'orders:{id}',
    });
    for (const metricsLabel of ['', 'x'.repeat(201), 42]) {
      expect(() =>
        resolveAcquireOptions({ metricsLabel } as AcquireOptions, defaults, false),
      ).toThrow(/metricsLabel must be a string of 1 to 200 characters/);
    }
  });

  it('lets the module renewal setting override the method default, and the call override both', () => {
    const off = resolveModuleOptions({ uri, renewal: { enabled: false } });
    expect(resolveAcquireOptions({}, off, true).renew).toBe(false);
    expect(resolveAcquireOptions({ renew: true }, off, true).renew).toBe(true);
    expect(resolveAcquireOptions({ renew: { intervalRatio: 0.5 } }, off, false)).toMatchObject({
      renew: true,
      renewalIntervalRatio: 0.5,
    });
    expect(resolveAcquireOptions({ renew: { enabled: false } }, defaults, true).renew).toBe(false);
  });

  it('accepts timeoutMs 0 (one attempt)', () => {
    expect(resolveAcquireOptions({ timeoutMs: 0 }, defaults, false).timeoutMs).toBe(0);
  });

  it.each([
    [{ ttlMs: -5 }, 'ttlMs must be an integer from 1000 to 2147483647, got -5'],
    [{ timeoutMs: Infinity }, 'timeoutMs must be an integer from 0 to 2147483647, got Infinity'],
    [{ timeoutMs: NaN }, 'timeoutMs must be an integer from 0 to 2147483647, got NaN'],
    [{ renew: 'yes' }, 'renew must be true, false or renewal options, got "yes"'],
    [{ signal: {} }, 'signal must be an AbortSignal, got an object'],
    [{ scope: 'session:\uDFFF' }, 'scope must be a string of 1 to 200 characters without NUL'],
    [[], 'options must be an object, got an array'],
  ])('rejects %p', (options, message) => {
    expect(() => resolveAcquireOptions(options as never, defaults, false)).toThrow(message);
  });
});

function capture(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a throw');
}
