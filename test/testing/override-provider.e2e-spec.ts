import { Controller, Get, type INestApplication, Injectable, Param } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { type LockHandle, Locked, LockService, MongoLockModule } from '../../lib';

jest.setTimeout(30_000);

@Injectable()
class LedgerService {
  @Locked('ledger:{args.0}')
  async post(account: string): Promise<string> {
    return `posted ${account}`;
  }
}

@Controller('ledger')
class LedgerController {
  @Get(':account')
  @Locked('ledger:{params.account}')
  async read(@Param('account') account: string) {
    return { account };
  }
}

/** Stands in for LockService: runs the work at once and records the keys. */
function fakeLockService() {
  const keys: string[][] = [];
  const handle = { key: '', keys: [], fence: 1n, signal: new AbortController().signal };
  return {
    keys,
    withLock: jest.fn(async (wanted: string | string[], fn: (lock: LockHandle) => unknown) => {
      keys.push(([] as string[]).concat(wanted));
      return fn(handle as unknown as LockHandle);
    }),
  };
}

describe('overrideProvider(LockService) on MongoLockModule', () => {
  let app: INestApplication;
  let fake: ReturnType<typeof fakeLockService>;

  beforeAll(async () => {
    fake = fakeLockService();
    const moduleRef = await Test.createTestingModule({
      // Never contacted: the overridden LockService is the only thing that connects.
      imports: [MongoLockModule.forRoot({ uri: 'mongodb://nowhere.invalid/app' })],
      controllers: [LedgerController],
      providers: [LedgerService],
    })
      .overrideProvider(LockService)
      .useValue(fake)
      .compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
  });

  it('binds @Locked provider methods to the fake', async () => {
    await expect(app.get(LedgerService).post('acc-1')).resolves.toBe('posted acc-1');
    expect(fake.keys).toContainEqual(['ledger:acc-1']);
  });

  it('locks @Locked handlers with the fake', async () => {
    await request(app.getHttpServer() as Parameters<typeof request>[0])
      .get('/ledger/acc-2')
      .expect(200, { account: 'acc-2' });
    expect(fake.keys).toContainEqual(['ledger:acc-2']);
  });
});
