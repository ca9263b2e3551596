import { MongoLockError } from '../../errors/mongo-lock.error';
import { notWritten } from './document-writes';

// The race behind it (our entry led at the read, not at the write, five times over) cannot be
// made on demand on a server: the error's wording is tested here, on its own.
describe('the error of a document write that matched nothing though nothing was in the way', () => {
  it('without a version field: a MongoLockError, not a TypeError', () => {
    const error = notWritten(undefined, '"a"');
    expect(error).toBeInstanceOf(MongoLockError);
    expect(error.message).toMatch(/^Document "a" was not written in 5 tries/);
  });

  it.each(['int', 'decimal128'] as const)('with a %s version: no word of a date', (type) => {
    expect(notWritten({ field: 'v', type }, '"a"').message).not.toMatch(/date/);
  });

  it('with a date version: says it is not before the server clock', () => {
    expect(notWritten({ field: 'at', type: 'date' }, '"a"').message).toMatch(
      /date version "at" is not before MongoDB's clock/,
    );
  });
});
