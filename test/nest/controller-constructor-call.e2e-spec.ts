// Promised (docs/http.md, first section): a `@Locked` controller method called other than as
// its route, "on the instance Nest made", "is locked as a provider method is"; only "a
// controller your own code made with `new`" runs as is. docs/guarantees.md: a `@Locked` method
// called before the module started fails with `MongoLockError` (L32 extended this to controllers
// Nest made, from their construction to the explorer's init).
//
// The case: a controller Nest is making calls its `@Locked` method from its constructor (a
// warm-up kicked off there). Nest stores the instance in its wrapper only after the constructor
// returns, so the explorer also counts an instance of a controller class whose wrapper is not
// resolved yet (`willBind` in lib/locked-methods.explorer.ts); it used to run unlocked.
import { Controller, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Locked, LockService, MongoLockError } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule } from './support/nest-apps';

jest.setTimeout(60_000);

/** What each warm-up saw: the key it ran under, or the error it failed with. */
const seen = new Map<string, Promise<unknown>>();

@Controller('cache')
class CacheController {
  constructor() {
    seen.set(
      'controller',
      this.warmUp().catch((error: unknown) => error),
    );
  }

  @Locked('cache:warm-up')
  async warmUp(): Promise<string> {
    return LockService.current()?.key ?? 'ran without its lock';
  }
}

@Injectable()
class CacheService {
  constructor() {
    seen.set(
      'provider',
      this.warmUp().catch((error: unknown) => error),
    );
  }

  @Locked('cache:warm-up-service')
  async warmUp(): Promise<string> {
    return LockService.current()?.key ?? 'ran without its lock';
  }
}

@Controller('feature')
class FeatureController {
  constructor() {
    seen.set(
      'feature',
      this.warmUp().catch((error: unknown) => error),
    );
  }

  @Locked('feature:warm-up')
  async warmUp(): Promise<string> {
    return LockService.current()?.key ?? 'ran without its lock';
  }
}

@Module({ controllers: [FeatureController] })
class FeatureModule {}

let mongo: TestMongo;

beforeAll(async () => {
  mongo = await startTestMongo();
});

afterAll(async () => {
  await mongo?.stop();
});

describe('a @Locked controller method called from its constructor', () => {
  it('is refused in a feature module imported before the lock module, never run unlocked', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [FeatureModule, lockModule(mongo)],
    }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    try {
      expect(await seen.get('feature')).toBeInstanceOf(MongoLockError);
    } finally {
      await app.close();
    }
  });

  it('is refused with MongoLockError, as a provider method is, never run unlocked', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [lockModule(mongo)],
      controllers: [CacheController],
      providers: [CacheService],
    }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    try {
      expect(await seen.get('provider')).toBeInstanceOf(MongoLockError);
      expect(await seen.get('controller')).toBeInstanceOf(MongoLockError);
      expect(String(await seen.get('controller'))).toMatch(/called before MongoLockModule/);
    } finally {
      await app.close();
    }
  });
});
