import { InvalidLockKeyError } from '../errors/invalid-lock-key.error';
import { listLocksQuery } from './list-locks';

describe('listLocksQuery', () => {
  it.each([
    [{ prefix: 1 as never }, 'list() option prefix: Lock key must be a string, got a number'],
    [{ after: '' }, 'list() option after: Lock key must not be empty'],
  ])('names the option a bad key was given as (%p)', (options, message) => {
    expect(() => listLocksQuery(options)).toThrow(InvalidLockKeyError);
    expect(() => listLocksQuery(options)).toThrow(message);
  });

  it('takes an empty prefix as every key', () => {
    expect(listLocksQuery({ prefix: '' })).toEqual({ prefix: '', after: undefined, limit: 100 });
  });
});
