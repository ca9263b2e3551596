// Document locks over HTTP: MongoDB out of reach during a commit, and id templates that could
// name another's document.
import { Body, Controller, HttpCode, Module, Post, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { InvalidLockKeyError, LockStoreUnavailableError } from '../../lib/errors';
import {
  type DocumentLockHandle,
  Locked,
  LockedDoc,
  LockedDocument,
  MongoLockModule,
} from '../../lib';
import { faultTools } from '../lock-service/adversarial/kit';
import { LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

/** Armed by the test once the handler holds the lock, so that only the commit meets it. */
let beforeCommit: () => Promise<unknown> = async () => undefined;
let handlerError: unknown;

@Controller('accounts')
class AccountsController {
  @Post(':id/withdraw')
  @HttpCode(200)
  @LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
  async withdraw(@Body() body: { amount: number }, @LockedDoc() lock: DocumentLockHandle) {
    await beforeCommit();
    try {
      return await lock.commit({ $inc: { balance: -body.amount } });
    } catch (error) {
      handlerError = error;
      throw error;
    }
  }
}

describe('document locks over HTTP with MongoDB out of reach', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint } = faultTools(kit);
  let app: INestApplication;

  beforeEach(async () => {
    const client = await kit.client();
    await client
      .db(kit.mongo.dbName)
      .collection<{ _id: string; balance: number }>('accounts')
      .insertOne({ _id: 'a', balance: 100 });
    @Module({
      imports: [
        MongoLockModule.forRoot({ ...kit.options({ client }), isGlobal: true }),
        MongoLockModule.forFeature([{ name: 'accounts', collection: 'accounts' }]),
      ],
      controllers: [AccountsController],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, { logger: false, forceCloseConnections: true });
    await app.listen(0, '127.0.0.1');
  });
  afterEach(async () => {
    beforeCommit = async () => undefined;
    await app?.close();
  });

  it('a commit that cannot reach MongoDB answers 503 with Retry-After', async () => {
    let before = 0;
    // ShutdownInProgress twice: the driver's retry fails too.
    beforeCommit = async () => {
      before = await failPoint({ times: 2 }, { failCommands: ['findAndModify'], errorCode: 91 });
    };
    const response = await fetch(`${await app.getUrl()}/accounts/a/withdraw`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 1 }),
    });
    // The retry is sent only if the server is found again within the command's deadline; on a
    // loaded machine it may not be, and the commit fails on the first answer alone.
    const hits = (await failPoint('off')) - before;
    expect(hits).toBeGreaterThanOrEqual(1);
    expect(hits).toBeLessThanOrEqual(2);
    expect(handlerError).toBeInstanceOf(LockStoreUnavailableError);
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
  });
});

describe('@LockedDocument id templates', () => {
  it('refuses two placeholders when the decorator is applied', () => {
    const decorate = () => {
      class NotesController {
        @LockedDocument('notes', '{user.tenant}-{params.id}')
        edit() {
          return undefined;
        }
      }
      return NotesController;
    };
    expect(decorate).toThrow(InvalidLockKeyError);
    expect(decorate).toThrow(/one placeholder/);
  });

  it.each(['a%{params.id}', '{{%}}{params.id}'])(
    'refuses %s when the decorator is applied: its text would be decoded',
    (template) => {
      const decorate = () => {
        class NotesController {
          @LockedDocument('notes', template)
          edit() {
            return undefined;
          }
        }
        return NotesController;
      };
      expect(decorate).toThrow(/the id template must not contain %/);
    },
  );

  it('names itself in its errors, and refuses @Locked beside it', () => {
    const badOption = () => {
      class NotesController {
        @LockedDocument('notes', '{params.id}', { ttlMs: 5 })
        edit() {
          return undefined;
        }
      }
      return NotesController;
    };
    expect(badOption).toThrow(/^@LockedDocument on NotesController\.edit: option ttlMs must be/);
    const both = () => {
      class NotesController {
        @Locked('notes')
        @LockedDocument('notes', '{params.id}')
        edit() {
          return undefined;
        }
      }
      return NotesController;
    };
    expect(both).toThrow(
      'NotesController.edit has both @Locked and @LockedDocument; a method takes one of them',
    );
  });

  it('takes one placeholder with literal text around it', () => {
    const decorate = () => {
      class NotesController {
        @LockedDocument('notes', 'note-{params.id}')
        edit() {
          return undefined;
        }
      }
      return NotesController;
    };
    expect(decorate).not.toThrow();
  });
});
