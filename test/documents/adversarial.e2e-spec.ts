// Adversarial review of document locks (issue 11). Every test here reproduces one defect and
// FAILS on the code as reviewed; it passes once the defect is fixed. See the review report.
import { firstValueFrom } from 'rxjs';
import { Decimal128, Long } from 'mongodb';
import type { Collection, Document } from 'mongodb';
import {
  DocumentLockedError,
  DocumentNotFoundError,
  InvalidLockKeyError,
  InvalidLockOptionsError,
  LockLostError,
  VersionConflictError,
} from '../../lib/errors';
import { LockTestKit, listeningWhileHeld, settle, sleep } from '../lock-service/lock-test-kit';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { ReplyDelayProxy } from '../support/reply-delay-proxy';

jest.setTimeout(60_000);

interface Account extends Document {
  _id: unknown;
  balance?: number;
  tenant?: string;
  version?: number;
}

/** The collection as other code sees it: any fields. */
interface Raw {
  _id: string | number;
  [field: string]: unknown;
}

/** Each engine's lock field: held (a filter, and a stored form), and other code's unlock. */
const lockField = {
  v2: {
    locked: { '_lock.line.0': { $exists: true } },
    held: { line: [{ h: expect.any(String) }] },
    unlockByHand: { $unset: { '_lock.line': '' } } as Document,
  },
};

describe.each(['v2'] as const)('Document locks (adversarial review, engine %s)', (engine) => {
  const kit = LockTestKit.forSuite();
  let seq = 0;
  let accounts: Collection<Raw>;
  let collectionName: string;
  const form = lockField[engine];
  const service = () => kit.service({ engine, shutdownGraceMs: 200 });

  beforeEach(async () => {
    seq += 1;
    collectionName = `adversarial_${seq}`;
    const client = await kit.client();
    accounts = client.db(kit.mongo.dbName).collection<Raw>(collectionName);
    await accounts.insertMany([
      { _id: 'a', balance: 100, tenant: 't1', version: 1 },
      { _id: 'b', balance: 5, tenant: 't2', version: 1 },
    ]);
  });

  async function unlocked(): Promise<boolean> {
    const locked = await accounts.countDocuments(form.locked);
    return locked === 0;
  }

  describe('ids that smuggle a query operator lock another document', () => {
    it('an id that is a class instance with a $gt key is refused', async () => {
      const docs = (await service()).documents<Account>(collectionName);
      class Id {
        $gt = '';
      }
      const result = await settle(docs.acquire(new Id()));
      expect(result).toBeInstanceOf(InvalidLockKeyError);
      expect(await unlocked()).toBe(true);
    });

    it('an id that is a Map with a $gt key is refused', async () => {
      const docs = (await service()).documents<Account>(collectionName);
      const result = await settle(docs.acquire(new Map([['$gt', '']])));
      expect(result).toBeInstanceOf(InvalidLockKeyError);
      expect(await unlocked()).toBe(true);
    });
  });

  describe('update validation', () => {
    it('a pipeline stage whose body is a Map cannot write the lock field nor the version', async () => {
      const docs = (await service()).documents<Account>(collectionName, {
        version: { field: 'version' },
      });
      const lock = await docs.acquire('a');
      const result = await settle(
        lock.update([
          {
            $set: new Map<string, unknown>([
              ['_lock', null],
              ['version', 42],
            ]),
          },
        ]),
      );
      expect(result).toBeInstanceOf(InvalidLockOptionsError);
      const stored = await accounts.findOne({ _id: 'a' });
      expect(stored?.version).toBe(1);
      expect(stored?._lock).toMatchObject(form.held);
    });
  });

  describe('createIfMissing', () => {
    it('does not write its fields into an existing document that has only an _id', async () => {
      await accounts.insertOne({ _id: 'bare' });
      const docs = (await service()).documents<Account>(collectionName);
      const lock = await docs.acquire('bare', { createIfMissing: { balance: 0 } });
      expect(lock.created).toBe(false);
      await lock.release();
      expect(await accounts.findOne({ _id: 'bare' }, { projection: { _lock: 0 } })).toEqual({
        _id: 'bare',
      });
    });

    it('does not write its fields into an existing document that has only _id and the where fields', async () => {
      await accounts.insertOne({ _id: 'tenanted', tenant: 't1' });
      const docs = (await service()).documents<Account>(collectionName);
      const lock = await docs.acquire('tenanted', {
        where: { tenant: 't1' },
        createIfMissing: { balance: 0 },
      });
      expect(lock.created).toBe(false);
      await lock.release();
      expect(await accounts.findOne({ _id: 'tenanted' }, { projection: { _lock: 0 } })).toEqual({
        _id: 'tenanted',
        tenant: 't1',
      });
    });

    it('applies its fields when where puts its equalities inside $and', async () => {
      const docs = (await service()).documents<Account>(collectionName);
      const lock = await docs.acquire('n', {
        where: { $and: [{ tenant: 't1' }] },
        createIfMissing: { balance: 0 },
      });
      expect(lock.created).toBe(true);
      expect(lock.doc).toEqual({ _id: 'n', tenant: 't1', balance: 0 });
      await lock.release();
    });

    it('starts a dotted version field at 0', async () => {
      const docs = (await service()).documents<Account>(collectionName, {
        version: { field: 'meta.v' },
      });
      const lock = await docs.acquire('n', { createIfMissing: { balance: 0 } });
      expect(lock.created).toBe(true);
      const after = await settle(lock.commit({ $inc: { balance: 1 } }));
      expect(after).toEqual({ _id: 'n', balance: 1, meta: { v: 1 } });
    });

    it('a where naming the lock field inside $and is refused and creates nothing', async () => {
      const docs = (await service()).documents<Account>(collectionName);
      const result = await settle(
        docs.tryAcquire('n', {
          where: {
            $and: [{ _lock: { owner: 'ghost', expiresAt: new Date(Date.now() + 600_000) } }],
          },
          createIfMissing: { balance: 0 },
        }),
      );
      // Today: null (a losing attempt) that inserted a document locked by 'ghost' for 10 minutes.
      expect(result).toBeInstanceOf(InvalidLockOptionsError);
      expect(await accounts.findOne({ _id: 'n' })).toBeNull();
    });

    it('a duplicate key on another unique index is not reported as DocumentNotFoundError', async () => {
      await accounts.createIndex({ email: 1 }, { unique: true, sparse: true });
      await accounts.updateOne({ _id: 'b' }, { $set: { email: 'x@y' } });
      const docs = (await service()).documents<Account>(collectionName);
      const error = await settle(docs.acquire('n', { createIfMissing: { email: 'x@y' } }));
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(DocumentNotFoundError);
    });

    it('the caller whose insert landed is told created, though its reply came too late', async () => {
      const target = new URL(kit.mongo.uri);
      const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
      await proxy.start();
      try {
        const docs = (
          await kit.service({
            engine,
            operationTimeoutMs: 300,
            uri: `mongodb://127.0.0.1:${proxy.port}/?directConnection=true`,
          })
        ).documents<Account>(collectionName);
        // The first join finds nothing; the upsert's reply then comes after operationTimeoutMs,
        // and the retried join finds our entry in the line.
        const firstJoin = proxy.holdNextReply('findAndModify', 1);
        const acquiring = docs.acquire('new', {
          createIfMissing: { balance: 0 },
          ttlMs: 20_000,
          timeoutMs: 5_000,
        });
        await firstJoin;
        await proxy.holdNextReply('findAndModify', 1_500);
        const lock = await acquiring;
        const { created } = lock;
        await lock.release();
        expect(await accounts.countDocuments({ _id: 'new' })).toBe(1);
        expect(created).toBe(true);
        // No mark is left behind: the next caller did not create it.
        const again = await docs.acquire('new');
        expect(again.created).toBe(false);
        await again.release();
        const stored = await accounts.findOne({ _id: 'new' });
        expect(stored?._lock).toEqual({ f: expect.anything(), line: [], lead: expect.any(String) });
      } finally {
        await proxy.stop();
      }
    });
  });

  describe('date and decimal versions', () => {
    it('an update under the lock of a document whose date version is ahead of the server clock lands, the lock is kept', async () => {
      await accounts.insertOne({ _id: 'f', balance: 0, at: new Date(Date.now() + 60_000) });
      const docs = (await service()).documents<Account>(collectionName, {
        version: { field: 'at', type: 'date' },
      });
      const lock = await docs.acquire('f');
      const result = await settle(lock.update({ $inc: { balance: 1 } }));
      // Today: LockLostError, the lock revoked, though the lease was ours all along.
      expect(result).not.toBeInstanceOf(LockLostError);
      expect(lock.lost).toBe(false);
      expect((await accounts.findOne({ _id: 'f' }))?.balance).toBe(1);
    });

    it('updateIfCurrent at the current date version ahead of the server clock is not a conflict', async () => {
      const future = new Date(Date.now() + 60_000);
      await accounts.insertOne({ _id: 'f', balance: 0, at: future });
      const docs = (await service()).documents<Account>(collectionName, {
        version: { field: 'at', type: 'date' },
      });
      const result = await settle(docs.updateIfCurrent('f', future, { $inc: { balance: 1 } }));
      expect(result).not.toBeInstanceOf(VersionConflictError);
      expect((await accounts.findOne({ _id: 'f' }))?.balance).toBe(1);
    });

    it('updateIfCurrent on a locked document at an equal decimal version (2.5 vs 2.50) is DocumentLockedError', async () => {
      await accounts.insertOne({ _id: 'd', balance: 0, dec: Decimal128.fromString('2.50') });
      const docs = (await service()).documents<Account>(collectionName, {
        version: { field: 'dec', type: 'decimal128' },
      });
      const lock = await docs.acquire('d');
      const result = await settle(docs.updateIfCurrent('d', '2.5', { $set: { balance: 1 } }));
      expect(result).toBeInstanceOf(DocumentLockedError);
      await lock.release();
    });
  });

  describe('commit', () => {
    it('a commit applied while the lease was live, its reply after the local deadline: withLock does not report the lock lost', async () => {
      const target = new URL(kit.mongo.uri);
      const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
      await proxy.start();
      try {
        const locks = await kit.service({
          engine,
          uri: `mongodb://127.0.0.1:${proxy.port}/?directConnection=true`,
          shutdownGraceMs: 200,
        });
        const docs = locks.documents<Account>(collectionName);
        const outcome = await settle(
          docs.withLock(
            'a',
            async (lock) => {
              // Commit 300 ms before the local deadline; the server applies it at once (lease
              // live), its reply reaches us 1 s later, after the local deadline.
              await sleep(Math.max(0, lock.expiresAt.getTime() - Date.now() - 300));
              const held = proxy.holdNextReply('findAndModify', 1_000);
              const committing = lock.commit({ $inc: { balance: 1 } });
              await held;
              return committing;
            },
            { ttlMs: 1_500, renew: false },
          ),
        );
        // The commit landed: reporting LockLostError invites a retry that applies it twice.
        expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(101);
        expect(outcome).not.toBeInstanceOf(LockLostError);
        expect(outcome).toMatchObject({ _id: 'a', balance: 101 });
      } finally {
        await kit.cleanup();
        await proxy.stop();
      }
    });
  });

  describe('waking waiters (costly, not fatal: they wake on the safety poll instead)', () => {
    it('a $set of the lock field to null by other code wakes waiters at once', async () => {
      const holder = (await service()).documents<Account>(collectionName);
      // Its safety poll is a minute away: only the change can wake it in time.
      const client = await kit.client({ monitorCommands: true });
      const waiter = (
        await kit.service({ engine, client, shutdownGraceMs: 200, safetyPollIntervalMs: 60_000 })
      ).documents<Account>(collectionName);
      await holder.acquire('a', { ttlMs: 20_000 });
      const listening = listeningWhileHeld(client, collectionName);
      const woken = firstValueFrom(waiter.waitForRelease('a'));
      // Its look saw 'a' held and its stream is open: only a wake-up can end the wait now.
      await listening;
      const freedAt = performance.now();
      await accounts.updateOne({ _id: 'a' }, { $set: { _lock: null } });
      await woken;
      // Not woken by the change, it waits for the poll (60 s) or the lease end (20 s).
      expect(performance.now() - freedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    });

    it('an unlock by other code (v1: $unset of the owner; v2: of the line) wakes waiters at once', async () => {
      const holder = (await service()).documents<Account>(collectionName);
      // Its safety poll is a minute away: only the change can wake it in time.
      const client = await kit.client({ monitorCommands: true });
      const waiter = (
        await kit.service({ engine, client, shutdownGraceMs: 200, safetyPollIntervalMs: 60_000 })
      ).documents<Account>(collectionName);
      await holder.acquire('a', { ttlMs: 20_000 });
      const listening = listeningWhileHeld(client, collectionName);
      const woken = firstValueFrom(waiter.waitForRelease('a'));
      // Its look saw 'a' held and its stream is open: only a wake-up can end the wait now.
      await listening;
      const freedAt = performance.now();
      await accounts.updateOne({ _id: 'a' }, form.unlockByHand);
      await woken;
      // Not woken by the change, it waits for the poll (60 s) or the lease end (20 s).
      expect(performance.now() - freedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    });
  });

  describe('key space', () => {
    it('withLock is re-entrant for ids 1 and Long(1), which name the same document', async () => {
      await accounts.insertOne({ _id: 1, balance: 0 });
      const docs = (await service()).documents<Account>(collectionName);
      const result = await settle(
        docs.withLock(1, () =>
          docs.withLock(Long.fromNumber(1), () => 'inner', { timeoutMs: 500 }),
        ),
      );
      // Today: LockNotAcquiredError, the inner call waits for its own enclosing lock.
      expect(result).toBe('inner');
    });
  });
});
