import { ObjectId } from 'mongodb';
import { InvalidLockKeyError, MongoLockError } from '../errors';
import { compileLockKeys, lockKey, type LockKeyContext, parseKeyTemplate } from './key-template';

function httpContext(parts: Partial<LockKeyContext> = {}): LockKeyContext {
  return { type: 'http', args: [], className: 'C', methodName: 'm', ...parts };
}

function keysOf(spec: Parameters<typeof compileLockKeys>[0], context: LockKeyContext) {
  return compileLockKeys(spec, 'C.m')(context);
}

function rejection(run: () => unknown): InvalidLockKeyError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLockKeyError);
    return error as InvalidLockKeyError;
  }
  throw new Error('expected InvalidLockKeyError, nothing was thrown');
}

describe('key templates: parsing (at decoration time)', () => {
  it.each([
    ['', /non-empty/],
    ['order:{params.id', /unmatched brace/],
    ['order:params.id}', /unmatched brace/],
    ['order:{param.id}', /must start with one of params, query, body, user, headers, args/],
    ['order:{params}', /names a whole source/],
    ['order:{params.}', /invalid path segment ""/],
    ['order:{ params.id }', /must start with one of/],
    ['order:{params.a b}', /invalid path segment "a b"/],
    ['order:{params.a[0]}', /invalid path segment "a\[0\]"/],
    ['x:{body.__proto__.polluted}', /may not use "__proto__"/],
    ['x:{body.constructor.name}', /may not use "constructor"/],
    ['x:{args.0.prototype}', /may not use "prototype"/],
    ['x:{user.a.constructor}', /may not use "constructor"/],
    ['x:{args.id}', /argument index/],
    ['x:{args.01}', /argument index/],
  ])('rejects %j', (template, message) => {
    const error = rejection(() => parseKeyTemplate(template));
    expect(error.message).toMatch(message);
    if (template) expect(error.message).toContain(JSON.stringify(template));
  });

  it('refuses a malformed template when compiled, before any call', () => {
    expect(() => compileLockKeys(['ok:{params.id}', 'bad:{params.id'], 'C.m')).toThrow(
      InvalidLockKeyError,
    );
    expect(() => compileLockKeys([], 'C.m')).toThrow(/at least one key template/);
  });

  it.each([
    ['a NUL', 'a\u0000b:{params.id}', /can never give a valid key.*contains a NUL character/],
    ['a lone surrogate', 'a\uD800:{params.id}', /can never give a valid key.*lone surrogate/],
    ['a lone surrogate between values', '{params.a}:\uDC00:{params.b}', /lone surrogate/],
    [
      'over 512 bytes of text',
      `${'x'.repeat(600)}:{params.id}`,
      /601 bytes long; the limit is 512/,
    ],
    [
      'over 512 bytes split by values',
      `${'x'.repeat(300)}:{params.a}:${'y'.repeat(300)}`,
      /602 bytes/,
    ],
    ['over 512 bytes without values', 'é'.repeat(257), /514 bytes/],
    ['512 bytes and a value', `${'x'.repeat(511)}:{args.0}`, /at least 513 UTF-8 bytes/],
  ])(
    'refuses literal text with %s when parsed, quoting the template shortened',
    (_label, template, message) => {
      const error = rejection(() => compileLockKeys(template, 'C.m'));
      expect(error.message).toMatch(message);
      expect(error.message.length).toBeLessThan(400);
      expect(error.message).toContain(
        `Lock key template ${JSON.stringify(template.slice(0, 64) + (template.length > 64 ? '…' : ''))}`,
      );
    },
  );

  it('accepts literal text up to the key limit, and a surrogate pair', () => {
    expect(keysOf(`${'x'.repeat(510)}:{args.0}`, httpContext({ args: ['7'] }))).toEqual([
      `${'x'.repeat(510)}:7`,
    ]);
    expect(keysOf('\uD83D\uDE00:{args.0}', httpContext({ args: ['7'] }))).toEqual([
      '\uD83D\uDE00:7',
    ]);
  });

  it('reads {{ and }} as literal braces', () => {
    expect(keysOf('a{{b}}:{params.id}', httpContext({ params: { id: '7' } }))).toEqual(['a{b}:7']);
  });
});

describe('key templates: resolution', () => {
  it('fills every HTTP source and args', () => {
    const context = httpContext({
      params: { id: '42' },
      query: { x: 'q' },
      body: { a: { b: 'deep' } },
      user: { id: 9 },
      headers: { 'x-tenant': 'acme' },
      args: [{ id: 'arg' }],
    });
    expect(
      keysOf('{params.id}|{query.x}|{body.a.b}|{user.id}|{headers.X-Tenant}|{args.0.id}', context),
    ).toEqual(['42|q|deep|9|acme|arg']);
  });

  it('formats scalars: finite numbers, bigints, booleans', () => {
    const context = httpContext({ args: [0, -1.5, 12n, true, false] });
    expect(keysOf('{args.0}/{args.1}/{args.2}/{args.3}/{args.4}', context)).toEqual([
      '0/-1.5/12/true/false',
    ]);
  });

  it('formats an ObjectId as its hex, whichever copy of bson made it', () => {
    const id = new ObjectId('65f0c0ffee00000000000001');
    // An ObjectId of another copy of bson: its own class, the same BSON type.
    class ForeignObjectId {
      readonly _bsontype = 'ObjectId';
      toHexString = () => '65f0c0ffee00000000000002';
    }
    const foreign = new ForeignObjectId();
    const context = httpContext({ args: [id, foreign] });
    expect(keysOf('order:{args.0}|{args.1}', context)).toEqual([
      'order:65f0c0ffee00000000000001|65f0c0ffee00000000000002',
    ]);
    // Another object with a toHexString is no id.
    expect(
      rejection(() => keysOf('order:{args.0}', httpContext({ args: [{ toHexString: () => 'x' }] })))
        .message,
    ).toContain('order:{args.0}');
  });

  it('reads array elements by index and getters of class instances', () => {
    class User {
      constructor(private readonly raw: { id: string }) {}
      get id() {
        return this.raw.id;
      }
    }
    const context = httpContext({ body: { items: ['first'] }, user: new User({ id: 'u1' }) });
    expect(keysOf('{body.items.0}:{user.id}', context)).toEqual(['first:u1']);
  });

  it('returns several keys without duplicates', () => {
    const context = httpContext({ params: { a: '1', b: '1' } });
    expect(keysOf(['k:{params.a}', 'k:{params.b}', 'j:{params.a}'], context)).toEqual([
      'k:1',
      'j:1',
    ]);
  });

  it.each([
    ['a missing field', { id: undefined }, /has no value/],
    ['an absent field', {}, /has no value/],
    ['null', { id: null }, /is null/],
    ['an object (operator injection)', { id: { $gt: '' } }, /is of type object/],
    ['an array', { id: ['a', 'b'] }, /is an array/],
    ['a function', { id: () => 'x' }, /is of type function/],
    ['a symbol', { id: Symbol('s') }, /is of type symbol/],
    ['NaN', { id: NaN }, /non-finite number/],
    ['Infinity', { id: Infinity }, /non-finite number/],
    ['an empty string', { id: '' }, /empty string/],
  ])('rejects %s, naming the template', (_label, body, message) => {
    const error = rejection(() => keysOf('order:{body.id}', httpContext({ body })));
    expect(error.message).toMatch(message);
    expect(error.message).toContain('"order:{body.id}"');
    expect(error.message).toContain('{body.id}');
  });

  it("takes a wildcard route parameter's segments (Express 5's `*path`) as their path", () => {
    const keyOf = (path: unknown, template = 'files:{params.path}') =>
      keysOf(template, httpContext({ params: { path } }));
    expect(keyOf(['a', 'b'])).toEqual(['files:a/b']);
    // A segment holding a `/` (`a%2Fb` in the URL) names the same path; empty ones none.
    expect(keyOf(['a/b'])).toEqual(['files:a/b']);
    expect(keyOf(['a', '', 'b', ''])).toEqual(['files:a/b']);
    expect(keyOf(['a//b'])).toEqual(['files:a/b']);
    expect(keyOf(['/b'])).toEqual(['files:b']);
    expect(keyOf(['a', '.', 'x', '..', 'b'])).toEqual(['files:a/b']);
    expect(keyOf(['a/../b'])).toEqual(['files:b']);
    expect(keyOf(['..', 'b'])).toEqual(['files:b']);
    // Escaped as any value: `/` in the template's text is encoded, so two paths stay apart.
    expect(keyOf(['a', 'b'], 'f/{params.path}/x')).toEqual(['f/a%2Fb/x']);
    expect(keyOf(['a:b', 'c'])).toEqual(['files:a%3Ab/c']);
    // Only an HTTP route's parameters are paths: an array elsewhere is still refused.
    expect(() => keysOf('{query.path}', httpContext({ query: { path: ['a'] } }))).toThrow(
      /is an array/,
    );
    expect(() =>
      keysOf('{params.path}', { ...httpContext({ params: { path: ['a'] } }), type: 'ws' }),
    ).toThrow(/is an array/);
    expect(() => keyOf([])).toThrow(/is an array/);
    expect(() => keyOf(['', ''])).toThrow(/is an array/);
    expect(() => keyOf(['a', '..'])).toThrow(/is an array/);
    expect(() => keyOf(['a', 1])).toThrow(/is an array/);
  });

  it('never walks into inherited functions or through primitives', () => {
    expect(() => keysOf('{body.toString}', httpContext({ body: {} }))).toThrow(
      /is of type function/,
    );
    expect(() => keysOf('{body.name.length}', httpContext({ body: { name: 'abc' } }))).toThrow(
      /has no value/,
    );
    expect(() => keysOf('{params.id}', httpContext())).toThrow(/has no value in this http call/);
  });

  it('fails a missing route parameter as a server error, a missing request value as invalid', () => {
    const run = (template: string) => () =>
      keysOf(template, httpContext({ params: {}, query: {} }));
    expect(run('{params.orderId}')).toThrow(MongoLockError);
    expect(run('{params.orderId}')).not.toThrow(InvalidLockKeyError);
    expect(run('{params.orderId}')).toThrow(/route parameters come from the route's path/);
    expect(run('{query.term}')).toThrow(InvalidLockKeyError);
  });

  it('fails a missing params value off HTTP as the message fault: interceptors may fill params', () => {
    for (const type of ['ws', 'rpc']) {
      const run = () => keysOf('{params.room}', { ...httpContext({ params: {} }), type });
      expect(run).toThrow(InvalidLockKeyError);
    }
  });

  it('applies the core key validation to the rendered key (NUL, length)', () => {
    const nul = rejection(() => keysOf('k:{body.id}', httpContext({ body: { id: 'a\0b' } })));
    expect(nul.message).toMatch(/"k:\{body.id\}" gave an invalid key: .*NUL/);
    const huge = rejection(() =>
      keysOf('k:{body.id}', httpContext({ body: { id: 'x'.repeat(10_000) } })),
    );
    expect(huge.message).toMatch(/limit is 512/);
    expect(huge.message.length).toBeLessThan(400);
  });

  it('refuses a value too long for a key before escaping it (a request cannot make it work)', () => {
    // Escaped, the 600 colons would be 1,800 bytes: the count says it stopped before that.
    const error = rejection(() =>
      keysOf('k:{body.id}', httpContext({ body: { id: ':'.repeat(600) } })),
    );
    expect(error.message).toMatch(/is 602 bytes long/);
  });

  it('refuses a hole in a sparse list of templates when compiled', () => {
    // eslint-disable-next-line no-sparse-arrays -- the input under test
    expect(() => compileLockKeys(['a', , 'b'] as string[], 'C.m')).toThrow(/non-empty/);
  });
});

describe('key functions', () => {
  it('accepts a string or an array of strings', () => {
    const context = httpContext({ params: { id: '5' } });
    expect(keysOf((c) => `o:${(c.params as { id: string }).id}`, context)).toEqual(['o:5']);
    expect(keysOf(() => ['a', 'b'], context)).toEqual(['a', 'b']);
  });

  // eslint-disable-next-line no-sparse-arrays -- a sparse result is one of the inputs
  it.each([[[]], [['a', 3]], [{}], [''], [undefined], [['a', , 'b']]])(
    'rejects the result %p',
    (result) => {
      const error = rejection(() => keysOf(() => result as never, httpContext()));
      expect(error.message).toContain('C.m');
    },
  );

  it('applies the core key validation to what it returns', () => {
    expect(() => keysOf(() => 'a\0', httpContext())).toThrow(/C\.m gave an invalid key/);
  });
});

describe('lockKey: a template filled by hand', () => {
  it("builds the key the decorator builds from the same values, escaped by the template's text", () => {
    const template = 'tenant:{body.tenant}:report:{body.report}';
    const body = { tenant: 't1:report:q3', report: 'x' };
    expect(lockKey(template, { body })).toBe('tenant:t1%3Areport%3Aq3:report:x');
    expect(lockKey(template, { body })).toBe(keysOf(template, httpContext({ body }))[0]);
    expect(lockKey('order:{params.id}/{args.0}', { params: { id: 'a/b' }, args: [7] })).toBe(
      'order:a%2Fb/7',
    );
  });

  it('refuses a missing value, a bad template and a key too long, as InvalidLockKeyError', () => {
    expect(() => lockKey('order:{params.id}', {})).toThrow(InvalidLockKeyError);
    expect(() => lockKey('order:{nope.id}', {})).toThrow(InvalidLockKeyError);
    expect(() => lockKey('order:{params.id}', { params: { id: 'x'.repeat(600) } })).toThrow(
      InvalidLockKeyError,
    );
  });
});
