// Promised (CHANGELOG, this release: "forRoot() and forRootAsync() refuse an `isGlobal` that is
// not true or false (Nest made the module global for 'no')"; docs/testing.md:
// "`MongoLockTestingModule.forRoot()` takes `MongoLockModule.forRoot()`'s options (and
// `isGlobal`)", refusing what it cannot honour with `InvalidLockOptionsError`).
//
// What happens instead: `MongoLockTestingModule.forRoot({ isGlobal: 'no' })` (a string read from
// the environment, say) is accepted, and Nest makes the module global, exactly the case the
// session's fix refuses for `MongoLockModule`: a feature module that does not import it gets
// `LockService` injected anyway, so a test passes that the application would fail.
//
// Where: lib/testing/mongo-lock-testing.module.ts, `forRoot`, passes `isGlobal` through as
// `global: isGlobal` unchecked; lib/mongo-lock.module.ts's `checkIsGlobal` is applied only to
// MongoLockModule. Checked fix: call the same check in `MongoLockTestingModule.forRoot` (e.g.
// `if (isGlobal !== undefined && typeof isGlobal !== 'boolean') fail('isGlobal', 'true or
// false', isGlobal)`); this test then passes.
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
