// Entries this process is leaving in the background (a release MongoDB did not confirm, a waiter
// that gave up) are left at once, not at their leaves' next retry, before its next join on the
// key (`LineLeaves.hurry`): a try right after such a release takes the key. One leave at a time
// per entry, shared by its retries and the calls that hurry it.
import { MongoNetworkError } from 'mongodb';
import type { Document } from 'mongodb';
import { LockNotAcquiredError, LockStoreUnavailableError } from '../../lib/errors';
import type { MongoLockHandle } from '../../lib/lock-handle';
import { LEAVE_PIPELINE, RENEW_PIPELINE } from '../../lib/store/line/line-pipelines';
import { commandOf, interceptedClient } from '../support/intercepted-collection';
import { LockTestKit, eventually, settle, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

/**
 * Refuses leaves while `on`; with `opensAfter`, lets them through from that many refusals on
 * (`opened` then settles, once the refused leave came back): its retry then waits its turn.
 */
function leaveCut(opensAfter = Infinity) {
  let open: () => void = () => undefined;
  const cut = {
    on: false,
    refused: 0,
    opened: new Promise<void>((resolve) => (open = resolve)),
    /** Leaves sent, per token. */
    sent: new Map<string, number>(),
    refuses(token: string): boolean {
      cut.sent.set(token, (cut.sent.get(token) ?? 0) + 1);
      if (!cut.on) return false;
      cut.refused += 1;
      if (cut.refused >= opensAfter) {
        cut.on = false;
        setTimeout(open, 20);
      }
      return true;
    },
  };
  return cut;
}

const refusal = () => Promise.reject(new MongoNetworkError('the leave never reached MongoDB'));

/** Releases `held` with its leaves cut (MongoDB does not confirm it), until `cut` lets them pass. */
async function releaseUnconfirmed(
  held: { release(): Promise<void> },
  cut: { on: boolean; opened: Promise<void> },
) {
  cut.on = true;
  await expect(held.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);
  await cut.opened;
}
const tokenOf = (handle: unknown) => (handle as MongoLockHandle).heldKeys[0].owner;

describe("this process's own entries on their way out", () => {
  const kit = LockTestKit.forSuite();

  /** A service whose leaves of key `k` go through `cut`; `joins` counts its other commands. */
  async function serviceWithLeavesCut(cut: ReturnType<typeof leaveCut>, delayMs = () => 0) {
    const joins = { sent: 0 };
    const client = interceptedClient(await kit.client(), async (target, args) => {
      const { pipeline, token } = commandOf(args);
      if ((args[0] as Document)._id !== 'k') return target.findOneAndUpdate(...args);
      if (pipeline !== LEAVE_PIPELINE) joins.sent += 1;
      else if (cut.refuses(token!)) return refusal();
      else await sleep(delayMs());
      return target.findOneAndUpdate(...args);
    });
    return { locks: await kit.service({ client }), joins };
  }

  it('a try right after a release MongoDB did not confirm takes the key, held once', async () => {
    // The release's leave and its first retries are lost; the next retry is 200 ms or more away.
    const cut = leaveCut(5);
    const { locks } = await serviceWithLeavesCut(cut);
    const other = await kit.service();
    const held = await locks.acquire('k', { ttlMs: 30_000 });
    await releaseUnconfirmed(held, cut);

    const tried = await locks.tryAcquire('k', { ttlMs: 30_000 });

    expect(tried).not.toBeNull();
    expect(tried!.fence).toBeGreaterThan(held.fence);
    const state = await other.inspect('k');
    expect(state?.holders.map((holder) => holder.fence)).toEqual([tried!.fence]);
    expect(state?.waiting).toBe(0);
    expect(await other.tryAcquire('k')).toBeNull();
    await tried!.release();
    // A second try's hurry, while the retry still waits, sends nothing more and undoes nothing.
    const again = await locks.tryAcquire('k');
    expect(again).not.toBeNull();
    await again!.release();
    expect(cut.sent.get(tokenOf(held))).toBe(6);
    // The old handle's release is confirmed (the leave the try sent found its entry): not lost.
    await eventually(
      async () => !((await settle(held.release())) instanceof LockStoreUnavailableError),
    );
    expect(await settle(held.release())).toBeUndefined();
    expect(held.lost).toBe(false);
    expect(cut.sent.get(tokenOf(held))).toBe(6);
    expect((await other.inspect('k'))?.held).toBe(false);
  });

  it("a leave that fails again leaves the try to its usual answer, and another's hold blocks it", async () => {
    const cut = leaveCut();
    const { locks } = await serviceWithLeavesCut(cut);
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

  it('a waiter that gave up while its renewal went unanswered is hurried too: a renewal makes no entry', async () => {
    const cut = leaveCut(5);
    const client = interceptedClient(await kit.client(), (target, args) => {
      const { pipeline, token } = commandOf(args);
      const cutOff =
        (pipeline === LEAVE_PIPELINE && cut.refuses(token!)) || pipeline === RENEW_PIPELINE;
      return cutOff ? refusal() : target.findOneAndUpdate(...args);
    });
    const locks = await kit.service({ client });
    const other = await kit.service();
    const theirs = await other.acquire('k', { ttlMs: 30_000 });
    cut.on = true;
    // It renews a third of its lease in (2 s), unanswered, and fails at 3 s, its entry still in
    // line (its leave is cut too), to lead once the other releases.
    const gaveUp = await settle(locks.acquire('k', { ttlMs: 6_000, timeoutMs: 3_000 }));
    expect(gaveUp).toBeInstanceOf(LockStoreUnavailableError);
    await cut.opened;
    await theirs.release();

    const tried = await locks.tryAcquire('k', { ttlMs: 30_000 });

    expect(tried).not.toBeNull();
    const state = await other.inspect('k');
    expect(state?.holders.map((holder) => holder.fence)).toEqual([tried!.fence]);
    expect(state?.waiting).toBe(0);
    await tried!.release();
  });

  it('a try whose time went on waiting for that leave sends no join, which could only come late', async () => {
    const cut = leaveCut(1);
    // Once let through, leaves take longer than a try's wait for a reply (1 s).
    const { locks, joins } = await serviceWithLeavesCut(cut, () => 1_500);
    const held = await locks.acquire('k', { ttlMs: 30_000 });
    await releaseUnconfirmed(held, cut);
    const joinsBefore = joins.sent;

    const tried = await settle(locks.tryAcquire('k'));

    expect(tried).toBeInstanceOf(LockStoreUnavailableError);
    expect((tried as Error).message).toMatch(
      /^The attempt on "k" was not sent: its 1000 ms for MongoDB's replies had run out/,
    );
    expect(joins.sent).toBe(joinsBefore);
  });

  it('the leave of a try whose join went unanswered is not hurried: it may never have landed', async () => {
    const dropped = { token: undefined as string | undefined };
    const leaves = new Map<string, number>();
    const client = interceptedClient(await kit.client(), async (target, args) => {
      const { pipeline, token } = commandOf(args);
      if (pipeline === LEAVE_PIPELINE) leaves.set(token!, (leaves.get(token!) ?? 0) + 1);
      else if (dropped.token === undefined) {
        dropped.token = token;
        await sleep(1_500);
        throw new MongoNetworkError('the join never reached MongoDB');
      }
      return target.findOneAndUpdate(...args);
    });
    const locks = await kit.service({ client });
    expect(await settle(locks.tryAcquire('k'))).toBeInstanceOf(LockStoreUnavailableError);
    // Its leave goes on, at most once a second, until the lease ends: the join may land late.
    await sleep(2_000);
    const before = leaves.get(dropped.token!) ?? 0;

    for (let i = 0; i < 10; i += 1) await (await locks.tryAcquire('k'))!.release();

    expect(leaves.get(dropped.token!) ?? 0).toBeLessThanOrEqual(before + 1);
  });

  it("a document lock's try right after a release MongoDB did not confirm takes the document", async () => {
    const cut = leaveCut(5);
    const client = interceptedClient(await kit.client(), (target, args) => {
      const [filter, , options] = args as unknown as [Document, unknown, Document | undefined];
      // A document's leave: by our token, answered with the document before it.
      const isLeave = options?.returnDocument === 'before' && '_lock.line.t' in filter;
      return isLeave && cut.refuses('') ? refusal() : target.findOneAndUpdate(...args);
    });
    const accounts = (await kit.client()).db(kit.mongo.dbName).collection('accounts');
    await accounts.insertOne({ _id: 'a' as unknown as Document['_id'], balance: 1 });
    const docs = (await kit.service({ client })).documents('accounts');
    const held = await docs.acquire('a', { ttlMs: 30_000 });
    await releaseUnconfirmed(held, cut);

    const tried = await docs.tryAcquire('a', { ttlMs: 30_000 });

    expect(tried).not.toBeNull();
    expect(tried!.fence).toBeGreaterThan(held.fence);
    await tried!.release();
  });
});
