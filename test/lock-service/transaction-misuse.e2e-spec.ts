// Locked transactions used the wrong way, and how the library answers (docs/transactions.md):
// writes of a lock outside its transaction are refused at once, the work's own errors pass
// through, and a lease the work outlasts says why it ran out.
import { MongoServerError, type Collection } from 'mongodb';
import { LockLostError, MongoLockError } from '../../lib/errors';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

type Mark = { _id: string | number; balance?: number };

describe('locked transactions used the wrong way', () => {
  const kit = LockTestKit.forSuite();

  /** A service on its own client, and that client's collection `name`. */
  async function setUp(name: string) {
    const client = await kit.client();
    const locks = await kit.service({ client });
    const marks: Collection<Mark> = client.db(kit.mongo.dbName).collection(name);
    return { locks, marks };
  }

  it.each(['exclusive', 'shared'] as const)(
    '%s: release() of its own handle inside the transaction is refused; the work commits once, released after',
    async (mode) => {
      const { locks, marks } = await setUp(`self_release_${mode}`);
      const key = `tx:self-release-${mode}`;
      let runs = 0;
      let refusal: unknown;
      const result = await locks.withLock(
        key,
        async (lock) => {
          runs += 1;
          await marks.insertOne({ _id: runs }, { session: lock.session });
          // Its write would conflict with the check before the commit: the work would run
          // again, with the key free for others.
          refusal = await lock.release().catch((error: unknown) => error);
          expect(lock.released).toBe(false);
          return 'done';
        },
        { transaction: true, mode },
      );
      expect(result).toBe('done');
      expect(refusal).toBeInstanceOf(MongoLockError);
      expect((refusal as Error).message).toMatch(/cannot be released inside its transaction/);
      expect(runs).toBe(1);
      expect(await marks.countDocuments()).toBe(1);
      expect((await locks.inspect(key))?.held).toBe(false);
    },
  );

  it('a transaction of its own for other keys inside the work is refused: it would commit apart from it', async () => {
    const { locks, marks } = await setUp('nested_transaction');
    let refusal: unknown;
    let nestedRan = false;
    await locks.withLock(
      'tx:outer',
      async (lock) => {
        await marks.insertOne({ _id: 'outer' }, { session: lock.session });
        refusal = await locks
          .withLock('tx:inner', () => (nestedRan = true), { transaction: true })
          .catch((error: unknown) => error);
        // Re-entering the outer key runs in the outer transaction, as before.
        await locks.withLock('tx:outer', () => undefined, { transaction: true });
      },
      { transaction: true },
    );
    expect(refusal).toBeInstanceOf(MongoLockError);
    expect((refusal as Error).message).toMatch(/"tx:inner" cannot be locked with a transaction/);
    expect(nestedRan).toBe(false);
    expect((await locks.inspect('tx:inner'))?.held ?? false).toBe(false);
    expect(await marks.countDocuments({ _id: 'outer' })).toBe(1);
    // Outside any locked transaction, the same call runs.
    expect(await locks.withLock('tx:inner', () => 'ran', { transaction: true })).toBe('ran');
  });

  it('release() of its own handle lost during the work rejects with the loss, as extend() does', async () => {
    const { locks, marks } = await setUp('lost_release');
    let refusals: unknown[] = [];
    const outcome = await locks
      .withLock(
        'tx:lost-release',
        async (lock) => {
          await marks.insertOne({ _id: 1 }, { session: lock.session });
          await new Promise((resolve) => setTimeout(resolve, 1_300));
          const tries = [lock.extend(), lock.release()];
          refusals = await Promise.all(tries.map((p) => p.catch((e: unknown) => e)));
        },
        { transaction: true, ttlMs: 1_000 },
      )
      .catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(refusals).toEqual([expect.any(LockLostError), expect.any(LockLostError)]);
  });

  it("the work's own error labelled UnknownTransactionCommitResult passes through unchanged", async () => {
    const { locks, marks } = await setUp('own_unknown');
    // Say, the outcome of another transaction the work committed on a session of its own.
    const own = new MongoServerError({ message: 'my other commit: unknown', code: 50 });
    own.addErrorLabel('UnknownTransactionCommitResult');
    let runs = 0;
    const outcome = await locks
      .withLock(
        'tx:own-unknown',
        async (lock) => {
          runs += 1;
          await marks.insertOne({ _id: 'x' }, { session: lock.session });
          throw own;
        },
        { transaction: true },
      )
      .catch((error: unknown) => error);
    expect(outcome).toBe(own);
    expect(runs).toBe(1);
    expect(await marks.countDocuments()).toBe(0);
    expect((await locks.inspect('tx:own-unknown'))?.held).toBe(false);
  });

  it("a document lock's release and extend inside a locked transaction that wrote its document are refused at once", async () => {
    const { locks, marks: accounts } = await setUp('doc_in_tx');
    await accounts.insertOne({ _id: 'a', balance: 10 });
    const docs = locks.documents<Mark>('doc_in_tx');
    const docLock = await docs.acquire('a');
    const refusals = await locks.withLock(
      'tx:doc',
      async (lock) => {
        await accounts.updateOne({ _id: 'a' }, { $inc: { balance: 5 } }, { session: lock.session });
        // Each write would wait for this transaction, which waits for this work: refused, not
        // left to fail after operationTimeoutMs.
        return Promise.all([
          docLock.release().catch((error: unknown) => error),
          docLock.extend().catch((error: unknown) => error),
        ]);
      },
      { transaction: true },
    );
    for (const refusal of refusals) {
      expect(refusal).toBeInstanceOf(MongoLockError);
      expect((refusal as Error).message).toMatch(/inside a locked transaction/);
    }
    expect(docLock.released).toBe(false);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(15);
    await docLock.release();
    expect((await docs.inspect('a'))?.held).toBe(false);
  });

  it('work that outlasts its lease is told the lease ran out during its transaction', async () => {
    const { locks, marks } = await setUp('outlast');
    const outcome = await locks
      .withLock(
        'tx:outlast',
        async (lock) => {
          await marks.insertOne({ _id: 'x' }, { session: lock.session });
          await new Promise((resolve) => setTimeout(resolve, 1_600));
        },
        { transaction: true, ttlMs: 1_000 },
      )
      .catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect((outcome as Error).message).toMatch(/ran out during its transaction/);
    expect(await marks.countDocuments()).toBe(0);
  });
});
