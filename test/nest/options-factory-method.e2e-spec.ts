// Promised (brief of the module, and lib/mongo-lock.module.ts): bad module options fail at
// start-up with a clear `InvalidLockOptionsError` naming what is wrong; `forRootAsync()` already
// refuses a `useFactory` or `useClass` that Nest could not call, "not as Nest's TypeError".
//
// The case: a `useClass` (or `useExisting`) whose instance has no `createMongoLockOptions`
// method (a configuration class written for another module, or a JavaScript app). The options
// provider checks the instance Nest made (lib/mongo-lock.module.ts, `checkedFactory`); it used
// to fail with Nest's internal `TypeError: optionsFactory[self.factoryClassMethodKey] is not a
// function`, which names neither the module nor the method.
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { InvalidLockOptionsError, MongoLockModule, type MongoLockModuleOptions } from '../../lib';

jest.setTimeout(60_000);

/** A configuration class written for another library: its method has another name. */
@Injectable()
class OtherLibraryConfig {
  createOptions(): MongoLockModuleOptions {
    return { uri: 'mongodb://127.0.0.1:1/never-used' };
  }
}

@Module({ providers: [OtherLibraryConfig], exports: [OtherLibraryConfig] })
class OtherLibraryConfigModule {}

async function startError(
  imports: NonNullable<Parameters<typeof Test.createTestingModule>[0]['imports']>,
) {
  const moduleRef = await Test.createTestingModule({ imports })
    .compile()
    .catch((error: unknown) => error);
  if (!(moduleRef instanceof Object) || moduleRef instanceof Error) return moduleRef;
  return (moduleRef as { init(): Promise<unknown> }).init().then(
    () => new Error('started'),
    (error: unknown) => error,
  );
}

describe('forRootAsync with a factory class lacking createMongoLockOptions', () => {
  it.each([
    ['useClass', { useClass: OtherLibraryConfig }],
    ['useExisting', { imports: [OtherLibraryConfigModule], useExisting: OtherLibraryConfig }],
  ])('%s: refused at start with InvalidLockOptionsError naming the method', async (_, given) => {
    const error = await startError([MongoLockModule.forRootAsync(given as never)]);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as Error).message).toMatch(/createMongoLockOptions/);
  });
});
