import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { InvalidLockKeyError } from '../errors/invalid-lock-key.error';
import { resolveDocumentId, resolveDocumentLocksOptions } from './document-input';

describe('resolveDocumentLocksOptions: the version field path', () => {
  it.each(['a..b', 'a.', '.a', '.', 'meta..v.x'])(
    'refuses %j (an empty part, which MongoDB refuses only at write time)',
    (field) => {
      const resolve = () => resolveDocumentLocksOptions('accounts', { version: { field } });
      expect(resolve).toThrow(InvalidLockOptionsError);
      expect(resolve).toThrow(`version.field must not have an empty part`);
    },
  );

  it.each(['v', 'meta.v', 'a.b.c'])('accepts %j', (field) => {
    expect(resolveDocumentLocksOptions('accounts', { version: { field } }).version).toEqual({
      field,
      type: 'int',
    });
  });

  it('still refuses dots in the lock field with its own message', () => {
    expect(() => resolveDocumentLocksOptions('accounts', { lockField: 'a..b' })).toThrow(
      'lockField must not contain . or $',
    );
  });
});

describe('resolveDocumentLocksOptions: the collection and the options object', () => {
  it.each(['system.profile', '.accounts', '', 'a$b'])('refuses collection %j', (collection) => {
    const resolve = () => resolveDocumentLocksOptions(collection, undefined);
    expect(resolve).toThrow(InvalidLockOptionsError);
    expect(resolve).toThrow('collection must be a collection name');
  });

  it('refuses options given as an array', () => {
    expect(() => resolveDocumentLocksOptions('accounts', [] as never)).toThrow(
      'options must be an object',
    );
  });
});

describe('resolveDocumentId', () => {
  it('refuses an invalid Date (its Extended JSON key could not be read back)', () => {
    const resolve = () => resolveDocumentId(new Date('not a date'), undefined);
    expect(resolve).toThrow(InvalidLockKeyError);
    expect(resolve).toThrow(/is an invalid Date/);
  });

  it('takes a valid Date', () => {
    const id = new Date(0);
    expect(resolveDocumentId(id, undefined)).toBe(id);
  });

  describe("idType 'number'", () => {
    it.each<[string, number]>([
      ['1', 1],
      ['-42', -42],
      ['999999999999999', 999_999_999_999_999],
      ['1000000000000000', 1_000_000_000_000_000],
      ['9007199254740991', Number.MAX_SAFE_INTEGER],
      ['-9007199254740991', Number.MIN_SAFE_INTEGER],
      ['007', 7],
    ])('converts %j (a safe integer)', (text, value) => {
      expect(resolveDocumentId(text, 'number')).toBe(value);
    });

    it('keeps -0 as it converts', () => {
      expect(Object.is(resolveDocumentId('-0', 'number'), -0)).toBe(true);
    });

    it.each([
      '9007199254740992',
      '-9007199254740992',
      '10000000000000000',
      '00000000000000001',
      '+1',
      '1.5',
      '1e3',
      ' 1',
      '',
      'abc',
    ])('refuses %j', (text) => {
      const resolve = () => resolveDocumentId(text, 'number');
      expect(resolve).toThrow(InvalidLockKeyError);
      expect(resolve).toThrow(/is not a safe integer/);
    });
  });
});
