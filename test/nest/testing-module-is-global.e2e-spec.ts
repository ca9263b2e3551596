// Promised (CHANGELOG, this release: "forRoot() and forRootAsync() refuse an `isGlobal` that is
// not true or false (Nest made the module global for 'no')"; docs/testing.md:
// "`MongoLockTestingModule.forRoot()` takes `MongoLockModule.forRoot()`'s options (and
// `isGlobal`)", refusing what it cannot honour with `InvalidLockOptionsError`).
//
// The case: `MongoLockTestingModule.forRoot({ isGlobal: 'no' })` (a string read from the
// environment, say). Refused as `MongoLockModule` refuses it; Nest made the module global, so a
// feature module that does not import it got `LockService` anyway, and a test passed that the
// application would fail.
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { InvalidLockOptionsError, LockService, MongoLockModule } from '../../lib';
import { MongoLockTestingModule } from '../../lib/testing';

@Injectable()
class Uses {
  constructor(readonly locks: LockService) {}
}

/** Does not import any lock module: LockService reaches it only from a global one. */
@Module({ providers: [Uses] })
class FeatureModule {}

describe('MongoLockTestingModule.forRoot with an isGlobal that is not a boolean', () => {
  it('is refused naming isGlobal, as MongoLockModule.forRoot is', async () => {
    // The control: the module the session fixed.
    expect(() => MongoLockModule.forRoot({ uri: 'mongodb://x', isGlobal: 'no' as never })).toThrow(
      InvalidLockOptionsError,
    );
    let error: unknown;
    try {
      const moduleRef = await Test.createTestingModule({
        imports: [FeatureModule, MongoLockTestingModule.forRoot({ isGlobal: 'no' as never })],
      }).compile();
      // Reached only if accepted: 'no' made it global, and the feature module got a LockService.
      error = moduleRef.get(Uses).locks instanceof LockService ? 'made global' : 'accepted';
      await moduleRef.close();
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).message).toContain('isGlobal');
  });
});
