import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { LEADER_KEY_PREFIX, leaderKey } from './leader-key';

describe('leaderKey', () => {
  it('makes the key of a name', () => {
    expect(leaderKey('digest')).toBe(`${LEADER_KEY_PREFIX}digest`);
  });

  it.each([
    ['empty', ''],
    ['not a string', 42],
    ['with a NUL character', 'a\0b'],
    ['with a lone surrogate', 'a\uD800b'],
    ['too long', 'x'.repeat(488)],
  ])('refuses a name %s as a bad option `name`, not a bad internal key', (_, name) => {
    const refusal = (() => {
      try {
        return leaderKey(name);
      } catch (error) {
        return error;
      }
    })();
    expect(refusal).toBeInstanceOf(InvalidLockOptionsError);
    expect(refusal).toMatchObject({ option: 'name' });
    expect((refusal as Error).message).toMatch(/^A leadership name /);
  });
});
