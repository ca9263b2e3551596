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
});
