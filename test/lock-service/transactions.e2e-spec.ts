import { Controller, Injectable, Module, Param, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Long,
  type ClientSession,
  type MongoServerError,
  type Collection,
  type Document,
  type MongoClient,
} from 'mongodb';
import { defer, firstValueFrom, Observable } from 'rxjs';
import { LockService, Locked, LockSession, MongoLockModule, type LockHandle } from '../../lib';
import {
  InvalidLockOptionsError,
  LockLostError,
  LockStoreUnavailableError,
  MongoLockError,
  TransactionOutcomeUnknownError,
} from '../../lib/errors';
import { faultTools } from './adversarial/kit';
import { canEmulate } from '../support/mongo';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

type Accounts = Collection<{ _id: string; balance: number }>;

/** A service on its own client, and collection `name` of that client with account a at 10. */
async function serviceWithAccount(kit: LockTestKit, name: string, extra: { engine?: 'v2' } = {}) {
  const client = await kit.client();
  const locks = await kit.service({ client, ...extra });
  const accounts: Accounts = client.db(kit.mongo.dbName).collection(name);
  await accounts.insertOne({ _id: 'a', balance: 10 });
  return { client, locks, accounts };
}

/** Account a gets 5 more, in the lock's transaction. */
const addFive = (accounts: Accounts, lock: LockHandle) =>
  accounts.updateOne({ _id: 'a' }, { $inc: { balance: 5 } }, { session: lock.session });

describe('withLock in a transaction', () => {
  const kit = LockTestKit.forSuite();

  it.each(['v2'] as const)(
    'commits the work with the lock held, on the session the handle carries (engine %s)',
    async (engine) => {
      const { locks, accounts } = await serviceWithAccount(kit, `tx_accounts_${engine}`, {
        engine,
      });
      const seen = await locks.withLock(
        'account:a',
        async (lock) => {
          expect(lock.session).toBeDefined();
          expect(LockService.current()?.session).toBe(lock.session);
          await addFive(accounts, lock);
          // Not visible outside the transaction before it commits.
          return (await accounts.findOne({ _id: 'a' }))?.balance;
        },
        { transaction: true },
      );
      expect(seen).toBe(10);
      expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(15);
      expect((await locks.inspect('account:a'))?.held).toBe(false);
    },
  );

  /** An operator removes the entry behind our back. */
  const takeOver = {
    v2: async (client: MongoClient) =>
      client
        .db(kit.mongo.dbName)
        .collection<{ _id: string; line: unknown[] }>(`${kit.collectionName}_line`)
        .updateOne({ _id: 'account:a' }, { $set: { line: [] } }),
  };

  it.each(['v2'] as const)(
    'never commits work whose lock was taken over before the commit (engine %s)',
    async (engine) => {
      const { client, locks, accounts } = await serviceWithAccount(kit, `tx_lost_${engine}`, {
        engine,
      });
      let runs = 0;
      await expect(
        locks.withLock(
          'account:a',
          async (lock) => {
            runs += 1;
            await addFive(accounts, lock);
            // While the work runs, after the transaction began (as after a pause past the lease).
            await takeOver[engine](client);
          },
          { transaction: true },
        ),
      ).rejects.toBeInstanceOf(LockLostError);
      expect(runs).toBeGreaterThanOrEqual(1);
      expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(10);
    },
  );

  it('never commits when its entry was removed and its token joined again behind another holder', async () => {
    const { client, locks, accounts } = await serviceWithAccount(kit, 'tx_readded');
    const line = client
      .db(kit.mongo.dbName)
      .collection<{ _id: string; f: Long; line: Document[] }>(`${kit.collectionName}_line`);
    let runs = 0;
    await expect(
      locks.withLock(
        'account:a',
        async (lock) => {
          await addFive(accounts, lock);
          // Our entry removed, another holder first, and a late join of our token behind it
          // (a retry MongoDB applied after an operator removed the entry): ours is live, not first.
          // Once: the write conflicts with the transaction, which runs again.
          runs += 1;
          if (runs > 1) return;
          const [ours] = (await line.findOne({ _id: 'account:a' }))!.line;
          const later = (n: number) => Long.fromBigInt(BigInt(ours.f as number) + BigInt(n));
          const leaseEnd = new Date(Date.now() + 30_000);
          await line.updateOne(
            { _id: 'account:a' },
            {
              $set: {
                f: later(2),
                line: [
                  { t: 'other-token', f: later(1), e: leaseEnd, h: 'other' },
                  { ...ours, f: later(2), e: leaseEnd },
                ],
              },
            },
          );
        },
        { transaction: true },
      ),
    ).rejects.toBeInstanceOf(LockLostError);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(10);
  });

  it('aborts when the work fails, and releases the lock', async () => {
    const { locks, accounts } = await serviceWithAccount(kit, 'tx_fail');
    await expect(
      locks.withLock(
        'account:a',
        async (lock) => {
          await addFive(accounts, lock);
          throw new Error('payment declined');
        },
        { transaction: true },
      ),
    ).rejects.toThrow('payment declined');
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(10);
    expect((await locks.inspect('account:a'))?.held).toBe(false);
  });

  it.each([
    ['commits', 15, (session: ClientSession) => session.commitTransaction()],
    ['aborts', 10, (session: ClientSession) => session.abortTransaction()],
  ] as const)(
    'work that %s the transaction itself is refused with MongoLockError, and the lock released',
    async (_label, balance, end) => {
      const { locks, accounts } = await serviceWithAccount(kit, `tx_ended_${balance}`);
      const outcome = await locks
        .withLock(
          'account:a',
          async (lock) => {
            await addFive(accounts, lock);
            await end(lock.session as ClientSession);
            return 'returned';
          },
          { transaction: true },
        )
        .catch((error: unknown) => error);
      expect(outcome).toBeInstanceOf(MongoLockError);
      expect((outcome as Error).message).toMatch(
        /^The work under "account:a" ended its transaction itself/,
      );
      // A commit of its own landed before the library could check the lock: told, not undone.
      expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(balance);
      expect((await locks.inspect('account:a'))?.held).toBe(false);
    },
  );

  it('work that commits the transaction itself and starts another is refused too, the other aborted', async () => {
    const { locks, accounts } = await serviceWithAccount(kit, 'tx_ended_restarted');
    let runs = 0;
    const outcome = await locks
      .withLock(
        'account:a',
        async (lock) => {
          runs += 1;
          const session = lock.session as ClientSession;
          await addFive(accounts, lock);
          await session.commitTransaction();
          // In a transaction again when it returns, but not the one the lock check guards.
          session.startTransaction();
          await addFive(accounts, lock);
          return 'returned';
        },
        { transaction: true },
      )
      .catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(MongoLockError);
    expect((outcome as Error).message).toMatch(
      /^The work under "account:a" ended its transaction itself/,
    );
    expect(runs).toBe(1);
    // The first commit landed before any check: told, not undone. The second never commits.
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(15);
    expect((await locks.inspect('account:a'))?.held).toBe(false);
  });

  it('a call re-entering a lock held without a transaction is refused before its work runs', async () => {
    const { locks, accounts } = await serviceWithAccount(kit, 'tx_reentered');
    let ran = false;
    const outcome = await locks
      .withLock('account:a', () =>
        locks.withLock(
          'account:a',
          async (lock) => {
            ran = true;
            await addFive(accounts, lock);
            throw new Error('payment declined');
          },
          { transaction: true },
        ),
      )
      .catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(MongoLockError);
    expect((outcome as Error).message).toMatch(/already held here without a transaction/);
    expect(ran).toBe(false);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(10);
    // Re-entering a lock held in a transaction runs in that transaction.
    await locks.withLock(
      'account:a',
      (outer) =>
        locks.withLock('account:a', (inner) => expect(inner.session).toBe(outer.session), {
          transaction: true,
        }),
      { transaction: true },
    );
  });

  it('refuses a bad transaction option before acquiring', async () => {
    const locks = await kit.service();
    await expect(
      locks.withLock('k', () => undefined, { transaction: 'yes' as never }),
    ).rejects.toBeInstanceOf(InvalidLockOptionsError);
    expect(await locks.inspect('k')).toBeNull();
  });

  it('@Locked with transaction gives the handler its session through @LockSession()', async () => {
    const client = await kit.client();
    const orders = client
      .db(kit.mongo.dbName)
      .collection<{ _id: string; paid: boolean }>('tx_orders');
    await orders.insertOne({ _id: '1', paid: false });

    @Controller('orders')
    class OrdersController {
      @Post(':id/pay')
      @Locked('order:{params.id}', { transaction: true })
      async pay(@Param('id') id: string, @LockSession() session: ClientSession) {
        await orders.updateOne({ _id: id }, { $set: { paid: true } }, { session });
        return { inTransaction: session.inTransaction() };
      }
    }
    @Module({
      imports: [MongoLockModule.forRoot(kit.options({ client }))],
      controllers: [OrdersController],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0);
    try {
      const response = await fetch(`${await app.getUrl()}/orders/1/pay`, { method: 'POST' });
      expect(response.status).toBe(201);
      expect(await response.json()).toEqual({ inTransaction: true });
      expect((await orders.findOne({ _id: '1' }))?.paid).toBe(true);
    } finally {
      await app.close();
    }
  });
});

(canEmulate('standalone') ? describe : describe.skip)(
  'withLock in a transaction on a standalone server',
  () => {
    const kit = LockTestKit.forSuite({ standalone: true });

    it('fails with a clear error before the work runs', async () => {
      const locks = await kit.service();
      let ran = false;
      const failure = await locks
        .withLock('k', () => (ran = true), { transaction: true })
        .catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(MongoLockError);
      expect(String((failure as Error).message)).toMatch(/replica set/);
      expect(ran).toBe(false);
      expect(await locks.inspect('k')).toBeNull();
    });
  },
);

describe('@Locked provider Observables in a transaction', () => {
  const kit = LockTestKit.forSuite();

  it('commit when the caller takes the value and leaves (firstValueFrom)', async () => {
    const client = await kit.client();
    const receipts = client.db(kit.mongo.dbName).collection<{ _id: string }>('tx_receipts');

    @Injectable()
    class Payments {
      @Locked('receipt:{args.0}', { transaction: true })
      pay$(id: string): Observable<string> {
        return defer(async () => {
          await receipts.insertOne({ _id: id }, { session: LockService.current()!.session });
          return id;
        });
      }
    }
    @Module({
      imports: [MongoLockModule.forRoot(kit.options({ client }))],
      providers: [Payments],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    await app.init();
    try {
      expect(await firstValueFrom(app.get(Payments).pay$('r1'))).toBe('r1');
      const locks = app.get(LockService);
      for (let i = 0; i < 100 && (await locks.inspect('receipt:r1'))?.held; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await locks.inspect('receipt:r1'))?.held).toBe(false);
      expect(await receipts.findOne({ _id: 'r1' })).toEqual({ _id: 'r1' });
    } finally {
      await app.close();
    }
  });
});

describe('withLock in a transaction: work longer than a renewal interval', () => {
  const kit = LockTestKit.forSuite();

  it('commits once: renewals pause during the transaction, whose check they would conflict with', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client });
    const marks = client.db(kit.mongo.dbName).collection<{ _id: string }>('tx_long');
    let runs = 0;
    await locks.withLock(
      'tx:long',
      async (lock) => {
        runs += 1;
        await marks.insertOne({ _id: `run-${runs}` }, { session: lock.session });
        // Past a third of the lease: a renewal would have written the lock by now.
        await new Promise((resolve) => setTimeout(resolve, 700));
      },
      { transaction: true, ttlMs: 1_500, renew: true },
    );
    expect(runs).toBe(1);
    expect(await marks.countDocuments()).toBe(1);
    // Renewals resume after the transaction: the lock is released, nothing is left held.
    expect((await locks.inspect('tx:long'))?.held).toBe(false);
  });
});

describe('withLock in a transaction: a commit of unknown outcome', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint } = faultTools(kit);

  it('is reported as TransactionOutcomeUnknownError and the lock is released', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client });
    // MaxTimeMSExpired with the label: the driver does not retry it, so the test is quick.
    await failPoint(
      { times: 1 },
      {
        failCommands: ['commitTransaction'],
        errorCode: 50,
        errorLabels: ['UnknownTransactionCommitResult'],
      },
    );
    const error = await locks
      .withLock('tx:unknown', async () => 'done', { transaction: true })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TransactionOutcomeUnknownError);
    expect(error).toBeInstanceOf(LockStoreUnavailableError);
    expect((await locks.inspect('tx:unknown'))?.held).toBe(false);
  });

  it('extend() inside the transaction is refused: its write would conflict with the check', async () => {
    const locks = await kit.service({ client: await kit.client() });
    let runs = 0;
    const outcome = await locks
      .withLock(
        'tx:extend',
        async (lock) => {
          runs += 1;
          await lock.extend();
        },
        { transaction: true },
      )
      .catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(MongoLockError);
    expect((outcome as Error).message).toMatch(/cannot be extended inside its transaction/);
    expect(runs).toBe(1);
    expect((await locks.inspect('tx:extend'))?.held).toBe(false);
  });

  it('a commit answered after the local lease ran out still resolves: the work committed once', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client });
    const marks = client.db(kit.mongo.dbName).collection<{ _id: string }>('tx_late_commit');
    // The commit lands, and is answered after the 1 s lease has run out locally.
    await failPoint(
      { times: 1 },
      { failCommands: ['commitTransaction'], blockConnection: true, blockTimeMS: 1_500 },
    );
    let lost = false;
    const result = await locks.withLock(
      'tx:late-commit',
      async (lock) => {
        lock.signal.addEventListener('abort', () => (lost = true));
        await marks.insertOne({ _id: 'once' }, { session: lock.session });
        return 'committed';
      },
      { transaction: true, ttlMs: 1_000 },
    );
    expect(lost).toBe(true);
    expect(result).toBe('committed');
    expect(await marks.countDocuments()).toBe(1);
  });

  it('ends a transaction whose abort failed, so that the key is free for others', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client });
    const other = await kit.service();
    // The work runs past its local deadline: its check has written the line, and the
    // driver's abort, which fails here, is not reported (withTransaction ignores it).
    const error = await locks
      .withLock(
        'tx:abort-lost',
        async (lock) => {
          await new Promise((resolve) => lock.signal.addEventListener('abort', resolve));
          await failPoint(
            { times: 2 },
            { failCommands: ['abortTransaction'], closeConnection: true },
          );
        },
        { transaction: true, ttlMs: 1_000 },
      )
      .catch((caught: unknown) => caught);
    await failPoint('off');
    expect(error).toBeInstanceOf(LockLostError);
    // Left open, the transaction would keep every command on the key waiting for 60 s.
    const handle = await other.acquire('tx:abort-lost', { timeoutMs: 3_000 });
    await handle.release();
  });

  it('answers 503 on a @Locked route, while a handler failing with a lock error is a 500', async () => {
    const client = await kit.client();
    const outcomeUnknown = {
      failCommands: ['commitTransaction'],
      errorCode: 50,
      errorLabels: ['UnknownTransactionCommitResult'],
    };

    @Controller('tx')
    class PaymentsController {
      @Post(':id/pay')
      @Locked('tx-http:{params.id}', { transaction: true })
      pay() {
        return { paid: true };
      }

      // The handler's own failure, though a lock error, is the handler's: not mapped.
      @Post(':id/own')
      @Locked('tx-http:{params.id}', { transaction: true })
      own() {
        throw new LockStoreUnavailableError('the handler gave up');
      }
    }
    @Module({
      imports: [MongoLockModule.forRoot(kit.options({ client }))],
      controllers: [PaymentsController],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0);
    try {
      const url = await app.getUrl();
      const firedBefore = await failPoint({ times: 1 }, outcomeUnknown);
      const unknown = await fetch(`${url}/tx/1/pay`, { method: 'POST' });
      expect(await failPoint('off')).toBe(firedBefore + 1);
      expect(unknown.status).toBe(503);
      expect(unknown.headers.get('retry-after')).toBe('1');
      const own = await fetch(`${url}/tx/1/own`, { method: 'POST' });
      expect(own.status).toBe(500);
      const locks = app.get(LockService);
      expect((await locks.inspect('tx-http:1'))?.held).toBe(false);
    } finally {
      await app.close();
    }
  });
});

/**
 * On engine v2, before the commit a write to the key's line inside the transaction proves the
 * call's entry still holds.
 */
describe('withLock in a transaction on engine v2', () => {
  const kit = LockTestKit.forSuite();

  it('runs again when the line changed during the work, and commits once', async () => {
    const { locks, accounts } = await serviceWithAccount(kit, 'v2_tx_rerun', {
      engine: 'v2',
    });
    const other = await kit.service({ engine: 'v2' });
    let runs = 0;
    let waiting: Promise<unknown> | undefined;
    await locks.withLock(
      'account:a',
      async (lock) => {
        runs += 1;
        await addFive(accounts, lock);
        // Another process joins the line to wait: a write to the document the check writes.
        if (runs === 1) {
          waiting = other.acquire('account:a', { timeoutMs: 20_000 });
          await new Promise((resolve) => setTimeout(resolve, 300));
        }
      },
      { transaction: true },
    );
    expect(runs).toBe(2);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(15);
    const next = (await waiting) as { release(): Promise<void> };
    await next.release();
  });
});

describe('withLock in a transaction: work that ends its transaction, then fails', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint } = faultTools(kit);

  it('is refused, not rerun: a rerun that behaved would hide its own commit', async () => {
    const { locks, accounts } = await serviceWithAccount(kit, 'tx_ended_then_transient');
    let runs = 0;
    const outcome = await locks
      .withLock(
        'account:a',
        async (lock) => {
          runs += 1;
          await addFive(accounts, lock);
          if (runs > 1) return 'rerun';
          const session = lock.session as ClientSession;
          await session.commitTransaction();
          session.startTransaction();
          // A transient error: the driver would abort this transaction and run the work again.
          await failPoint(
            { times: 1 },
            {
              failCommands: ['update'],
              errorCode: 112,
              errorLabels: ['TransientTransactionError'],
            },
          );
          await addFive(accounts, lock);
          return 'first run';
        },
        { transaction: true },
      )
      .catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(MongoLockError);
    expect((outcome as Error).message).toMatch(/ended its transaction itself/);
    expect(((outcome as Error).cause as MongoServerError).code).toBe(112);
    expect(runs).toBe(1);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(15);
    expect((await locks.inspect('account:a'))?.held).toBe(false);
  });
});
