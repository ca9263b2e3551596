import { InvalidLockOptionsError } from '../errors';
import { VersionETag } from './version.decorators';

describe('@VersionETag', () => {
  it.each([[''], [7 as unknown as string]])(
    'refuses field %p with the library error for a bad option',
    (field) => {
      expect(() => VersionETag(field)).toThrow(InvalidLockOptionsError);
      expect(() => VersionETag(field)).toThrow('@VersionETag(field) expects the version field');
    },
  );
});
