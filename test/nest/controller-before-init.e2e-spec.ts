// Promised (docs/http.md, first section): a `@Locked` controller method called other than as
// its route, "on the instance Nest made", "is locked as a provider method is"; and
// (docs/guarantees.md, "What is not promised") a `@Locked` method called from another module's
// `onModuleInit` that runs before the lock module's "fails with MongoLockError". Only "a
// controller your own code made with `new`" runs as is, without a lock.
//
// The case: a controller Nest made calls its `@Locked` method before
// `LockedMethodsExplorer.onModuleInit` has bound it (its own module's `onModuleInit` runs
// first: modules of equal distance go in import order, and a non-global lock module imported
// after the feature module is one). It fails with `MongoLockError` as a provider does: the
// explorer, from its construction to its init, says which instances it will bind
// (`isBoundSoon` in lib/decorators/lock-bindings.ts). It used to run unlocked, silently, as if
// made with `new`.
import { Controller, Injectable, Module, type OnModuleInit } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Locked, LockService, MongoLockError } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule } from './support/nest-apps';

jest.setTimeout(60_000);

/** What each warm-up saw: the key it ran under, or the error it failed with. */
const seen = new Map<string, unknown>();

async function record(name: string, call: () => Promise<string>) {
  seen.set(name, await call().catch((error: unknown) => error));
}

@Controller('cache')
class CacheController implements OnModuleInit {
  async onModuleInit() {
    await record('controller', () => this.warmUp());
  }

  /** Also called by a scheduler, say: locked on every instance Nest made. */
  @Locked('cache:warm-up')
  async warmUp(): Promise<string> {
    return LockService.current()?.key ?? 'ran without its lock';
  }
}

@Injectable()
class CacheService implements OnModuleInit {
  async onModuleInit() {
    await record('provider', () => this.warmUp());
  }

  @Locked('cache:warm-up-service')
  async warmUp(): Promise<string> {
    return LockService.current()?.key ?? 'ran without its lock';
  }
}

@Module({ controllers: [CacheController], providers: [CacheService] })
class CacheModule {}

let mongo: TestMongo;

beforeAll(async () => {
  mongo = await startTestMongo();
});

afterAll(async () => {
  await mongo?.stop();
});

describe('a @Locked controller method called before the lock module initialised', () => {
  it('is locked or refused with MongoLockError, as a provider method is, never run unlocked', async () => {
    const moduleRef = await Test.createTestingModule({
      // Not global, imported after the feature module: the feature module's hooks run first.
      imports: [CacheModule, lockModule(mongo)],
    }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    try {
      // The control: the provider in the same place is refused, as documented.
      expect(seen.get('provider')).toBeInstanceOf(MongoLockError);
      // Named as what it is, not the general list of unbound instances.
      expect(String(seen.get('provider'))).toMatch(/called before MongoLockModule initialised/);
      const controller = seen.get('controller');
      if (typeof controller === 'string') expect(controller).toBe('cache:warm-up');
      else expect(String(controller)).toMatch(/called before MongoLockModule initialised/);
    } finally {
      await app.close();
    }
  });
});
