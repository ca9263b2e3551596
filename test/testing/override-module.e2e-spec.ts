import { Controller, Get, Injectable, Module, Param } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Locked, LockNotAcquiredError, LockService, MongoLockModule } from '../../lib';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';

jest.setTimeout(30_000);

@Injectable()
class LedgerService {
  @Locked('ledger:{args.0}', { timeoutMs: 0 })
  async post(account: string): Promise<string> {
    return `posted ${account}`;
  }
}

@Controller('ledger')
class LedgerController {
  @Get(':account')
  @Locked('ledger:{params.account}', { timeoutMs: 0 })
  read(@Param('account') account: string) {
    return { account };
  }
}

// The app as docs/testing.md has it: its lock module kept in a constant, to override by it.
// The URI is never contacted when the override takes (`.invalid` never resolves).
const LOCKS = MongoLockModule.forRoot({ uri: 'mongodb://nowhere.invalid/app', isGlobal: true });

@Module({ imports: [LOCKS], controllers: [LedgerController], providers: [LedgerService] })
class AppModule {}

describe("overriding the app's MongoLockModule with MongoLockTestingModule", () => {
  it('takes when given the module forRoot() returned: the app locks in memory', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideModule(LOCKS)
      .useModule(MongoLockTestingModule.forRoot({ isGlobal: true }))
      .compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    try {
      const store = app.get(LockTestingStore);
      const other = await store.holdAs('ledger:acc-1', 'other-instance');
      await expect(app.get(LedgerService).post('acc-1')).rejects.toBeInstanceOf(
        LockNotAcquiredError,
      );
      await request(app.getHttpServer() as Parameters<typeof request>[0])
        .get('/ledger/acc-1')
        .expect(423);
      await other.release();
      await expect(app.get(LedgerService).post('acc-1')).resolves.toBe('posted acc-1');
    } finally {
      await app.close();
    }
  });

  it('does not take when given the MongoLockModule class: Nest matches the import object', async () => {
    // Not initialised: the real module would try the URI for its start-up timeout.
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideModule(MongoLockModule)
      .useModule(MongoLockTestingModule.forRoot({ isGlobal: true }))
      .compile();
    try {
      expect(() => moduleRef.get(LockTestingStore, { strict: false })).toThrow();
      expect(moduleRef.get(LockService, { strict: false })).toBeInstanceOf(LockService);
    } finally {
      await moduleRef.close();
    }
  });
});
