// A lock that ends without a release command (a document lock's commit) must still let the
// library give back a late win of the same call: an
// earlier attempt whose reply the caller stopped waiting for, and which reaches MongoDB after
// the commit, takes the free document again. That win is nobody's and must not keep the
// document locked for a whole lease.
import { LockTestKit, answerTo, eventually } from '../lock-service/lock-test-kit';
import { describeWithFailPoints, faultTools } from '../lock-service/adversarial/kit';

jest.setTimeout(30_000);

/** How long the server holds up the first attempt. */
const BLOCK_MS = 1_200;

interface Account {
  _id: string;
  balance: number;
}

describeWithFailPoints('a late attempt after the lock ended by a write', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('a late win after commit() is given back, not left locked for its lease', async () => {
    const client = await appClient('late-commit', { monitorCommands: true });
    const locks = await kit.service({ client, operationTimeoutMs: 400 });
    const other = await kit.service();
    const seed = await kit.client();
    const collectionName = `${kit.collectionName}_accounts`;
    await seed
      .db(kit.mongo.dbName)
      .collection<Account>(collectionName)
      .insertOne({ _id: 'a1', balance: 10 });
    const accounts = locks.documents<Account>(collectionName);

    // The client's first lock write is the one the fail point holds up: when it was sent, and
    // when its (late) reply came, so the test waits for it instead of sleeping.
    let blockedSentAt = Number.NaN;
    const landed = answerTo(client, (event) => {
      if (event.commandName !== 'findAndModify' || !Number.isNaN(blockedSentAt)) return false;
      blockedSentAt = performance.now();
      return true;
    });

    // The first attempt lands 1.2 s after it was sent, long after the call stopped waiting for
    // it (400 ms) and retried with the same token on another connection, and after the commit.
    const before = await failPoint(
      { times: 1 },
      {
        failCommands: ['findAndModify'],
        appName: 'late-commit',
        blockConnection: true,
        blockTimeMS: BLOCK_MS,
      },
    );
    const lock = await accounts.acquire('a1', { timeoutMs: 5_000, ttlMs: 20_000 });
    await lock.commit({ $inc: { balance: 1 } });
    const committedAt = performance.now();
    await landed;

    // The race ran: the fail point held the attempt, and commit() was done before the server
    // could run it (it waits BLOCK_MS from no earlier than the send), so it met a free document.
    expect(await failPoint('off')).toBe(before + 1);
    expect(committedAt).toBeLessThan(blockedSentAt + BLOCK_MS);

    // Given back within a few commands, not after the 20 s lease.
    await eventually(async () => {
      const probe = await other.documents<Account>(collectionName).tryAcquire('a1');
      await probe?.release();
      return probe !== null;
    }, 3_000);
  });
});
