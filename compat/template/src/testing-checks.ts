// The `nestjs-mongo-lock/testing` entry point, as an app's own tests use it. Type-checking this
// file proves the entry resolves, code and types, under the app's module resolution (classic
// `node` reads the package's `typesVersions`, node16/nodenext/bundler read `exports`); running
// it proves Node resolves it too and that it shares its classes with the main entry.
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockNotAcquiredError, LockService } from 'nestjs-mongo-lock';
import {
  type ForeignLock,
  LockTestingStore,
  MongoLockTestingModule,
  type MongoLockTestingModuleOptions,
} from 'nestjs-mongo-lock/testing';
import { LedgerService } from './ledger.service.js';

const testingOptions: MongoLockTestingModuleOptions = { defaultTtlMs: 10_000 };

/** AppModule's provider on the testing module instead of MongoLockModule: no MongoDB at all. */
@Module({
  imports: [MongoLockTestingModule.forRoot(testingOptions)],
  providers: [LedgerService],
})
class LedgerTestingModule {}

function expect(condition: boolean, message: string, detail?: unknown): void {
  if (!condition) {
    const shown = JSON.stringify(detail, (_, value: unknown) =>
      typeof value === 'bigint' ? value.toString() : value,
    );
    throw new Error(`testing entry: ${detail === undefined ? message : `${message}: ${shown}`}`);
  }
}

/**
 * Prints `ok - <name>`, or throws. Without @nestjs/testing (the apps do not install it): an
 * application context, which `init()`s as `Test.createTestingModule(...).compile()` + `init()`.
 */
export async function runTestingChecks(): Promise<void> {
  const context = await NestFactory.createApplicationContext(LedgerTestingModule, {
    logger: ['error', 'warn'],
  });
  try {
    const store = context.get(LockTestingStore);
    const locks = context.get(LockService);
    const ledger = context.get(LedgerService);
    const key = 'ledger:acct-9';

    // Free: the @Locked provider method runs under its lock.
    const first = await ledger.post('acct-9', 1);
    expect(first.key === key && first.heldByThisCall, 'provider ran unlocked', first);

    // Held by another instance: refused at once (timeoutMs 0), with the main entry's error class.
    const other: ForeignLock = await store.holdAs(key, 'other-instance');
    const refused: unknown = await ledger.post('acct-9', 2).then(
      (result) => result,
      (error: unknown) => error,
    );
    expect(refused instanceof LockNotAcquiredError, 'expected LockNotAcquiredError', {
      got: String(refused),
    });
    const holder = (refused as LockNotAcquiredError).holderId;
    expect(holder === 'other-instance', 'holderId of the refusal', { holder });
    expect((await locks.tryAcquire(key)) === null, 'tryAcquire got a key held by another');

    // Its lease ended (as if its holder had stalled): the method runs, with a newer fence.
    expect(store.expire(key), 'expire() found no live lease');
    const after = await ledger.post('acct-9', 3);
    expect(after.heldByThisCall, 'provider ran unlocked after expire()', after);
    expect(BigInt(after.fence ?? '0') > other.fence, 'fence not above the expired lease', {
      fence: after.fence,
      expired: other.fence.toString(),
    });
    expect(store.inspect(key)?.held !== true, 'provider lock not released', store.inspect(key));
    console.log(
      `ok - testing entry: @Locked runs when free, refused while held by another (holdAs), ` +
        `runs after expire() (fence ${after.fence})`,
    );
  } finally {
    await context.close();
  }
}
