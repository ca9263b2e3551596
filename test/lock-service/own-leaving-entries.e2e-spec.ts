// Entries this process is leaving in the background (a release MongoDB did not confirm, a waiter
// that gave up) are left at once, not at their leaves' next retry, before its next join on the
// key: a try right after such a release takes the key.
import { MongoNetworkError } from 'mongodb';
import type { Document } from 'mongodb';
import { LockNotAcquiredError, LockStoreUnavailableError } from '../../lib/errors';
import { LEAVE_PIPELINE } from '../../lib/store/line/line-pipelines';
import { commandOf, interceptedClient } from '../support/intercepted-collection';
import { LockTestKit, eventually, settle } from './lock-test-kit';

jest.setTimeout(60_000);

/**
 * Refuses the leaves `isLeave` recognises while `on`; with `opensAfter`, lets them through from
 * that many refusals on (`opened` then settles): the background retry is then waiting its turn.
 */
function leaveCut(opensAfter = Infinity) {
  let open: () => void = () => undefined;
  const cut = {
    on: false,
    refused: 0,
    opened: new Promise<void>((resolve) => (open = resolve)),
    refuses(): boolean {
      if (!cut.on) return false;
      cut.refused += 1;
      if (cut.refused >= opensAfter) {
        cut.on = false;
        open();
      }
      return true;
    },
  };
  return cut;
}

const refusal = () => Promise.reject(new MongoNetworkError('the leave never reached MongoDB'));

describe("this process's own entries on their way out", () => {
  const kit = LockTestKit.forSuite();

  /** A service whose leaves of `key` go through `cut`. */
  async function serviceWithLeavesCut(key: string, cut: ReturnType<typeof leaveCut>) {
    const client = interceptedClient(await kit.client(), (target, args) => {
      const { pipeline } = commandOf(args);
      const isLeave = pipeline === LEAVE_PIPELINE && (args[0] as Document)._id === key;
      return isLeave && cut.refuses() ? refusal() : target.findOneAndUpdate(...args);
    });
    return kit.service({ client });
  }

  it('a try right after a release MongoDB did not confirm takes the key, held once', async () => {
    // The release's leave and its first retries are lost; the next retry is 200 ms or more away.
    const cut = leaveCut(5);
    const locks = await serviceWithLeavesCut('k', cut);
    const other = await kit.service();
    const held = await locks.acquire('k', { ttlMs: 30_000 });
    cut.on = true;
    await expect(held.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);
    await cut.opened;

    const tried = await locks.tryAcquire('k', { ttlMs: 30_000 });

    expect(tried).not.toBeNull();
    expect(tried!.fence).toBeGreaterThan(held.fence);
    const state = await other.inspect('k');
    expect(state?.holders.map((holder) => holder.fence)).toEqual([tried!.fence]);
    expect(state?.waiting).toBe(0);
    expect(await other.tryAcquire('k')).toBeNull();
    // The old handle's release is confirmed (the leave the try sent found its entry): not lost.
    await eventually(
      async () => !((await settle(held.release())) instanceof LockStoreUnavailableError),
    );
    expect(await settle(held.release())).toBeUndefined();
    expect(held.lost).toBe(false);
    await tried!.release();
    expect((await other.inspect('k'))?.held).toBe(false);
  });

  it("a leave that fails again leaves the try to its usual answer, and another's hold blocks it", async () => {
    const cut = leaveCut();
    const locks = await serviceWithLeavesCut('k', cut);
    const other = await kit.service();
    const theirs = await other.acquire('k', { ttlMs: 30_000 });
    cut.on = true;
    // A waiter that gives up: its entry's leave is cut, so it stays in line.
    const gaveUp = await settle(locks.acquire('k', { timeoutMs: 300 }));
    expect(gaveUp).toBeInstanceOf(LockNotAcquiredError);
    await eventually(() => cut.refused >= 1);
    const refusedBefore = cut.refused;

    expect(await locks.tryAcquire('k')).toBeNull();

    // The try sent our waiter's leave first (refused); the other holds, our entry is still there.
    expect(cut.refused).toBeGreaterThan(refusedBefore);
    const state = await other.inspect('k');
    expect(state?.holders.map((holder) => holder.fence)).toEqual([theirs.fence]);
    expect(state?.waiting).toBe(1);
    cut.on = false;
    await eventually(async () => (await other.inspect('k'))?.waiting === 0);
    await theirs.release();
  });

  it("a document lock's try right after a release MongoDB did not confirm takes the document", async () => {
    const cut = leaveCut(5);
    const client = interceptedClient(await kit.client(), (target, args) => {
      const [filter, , options] = args as unknown as [Document, unknown, Document | undefined];
      // A document's leave: by our token, answered with the document before it.
      const isLeave = options?.returnDocument === 'before' && '_lock.line.t' in filter;
      return isLeave && cut.refuses() ? refusal() : target.findOneAndUpdate(...args);
    });
    const accounts = (await kit.client()).db(kit.mongo.dbName).collection('accounts');
    await accounts.insertOne({ _id: 'a' as unknown as Document['_id'], balance: 1 });
    const docs = (await kit.service({ client })).documents('accounts');
    const held = await docs.acquire('a', { ttlMs: 30_000 });
    cut.on = true;
    await expect(held.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);
    await cut.opened;

    const tried = await docs.tryAcquire('a', { ttlMs: 30_000 });

    expect(tried).not.toBeNull();
    expect(tried!.fence).toBeGreaterThan(held.fence);
    await tried!.release();
  });
});
