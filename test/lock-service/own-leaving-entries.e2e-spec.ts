// Entries this process is leaving in the background (a release MongoDB did not confirm, a waiter
// that gave up) must not block its own next join on the key: the join drops them, as their
// leaves would, and sends the usual commands byte for byte when there are none.
import { MongoNetworkError } from 'mongodb';
import type { CommandStartedEvent, Document } from 'mongodb';
import type { LockHandle } from '../../lib';
import { LockNotAcquiredError, LockStoreUnavailableError } from '../../lib/errors';
import {
  LEAVE_PIPELINE,
  exclusiveJoinPipeline,
  exclusiveTryJoinPipeline,
} from '../../lib/store/line/line-pipelines';
import { commandOf, interceptedClient } from '../support/intercepted-collection';
import { LockTestKit, eventually, settle } from './lock-test-kit';

jest.setTimeout(60_000);

describe("this process's own entries on their way out", () => {
  const kit = LockTestKit.forSuite();

  /** A service whose leaves of `key` never reach MongoDB while `cut.on`. */
  async function serviceWithLeavesCut(key: string) {
    const cut = { on: false, refused: 0 };
    const client = interceptedClient(await kit.client(), (target, args) => {
      const { pipeline } = commandOf(args);
      if (cut.on && pipeline === LEAVE_PIPELINE && (args[0] as Document)._id === key) {
        cut.refused += 1;
        return Promise.reject(new MongoNetworkError('the leave never reached MongoDB'));
      }
      return target.findOneAndUpdate(...args);
    });
    return { locks: await kit.service({ client }), cut };
  }

  it('a try right after a release MongoDB did not confirm takes the key, held once', async () => {
    const { locks, cut } = await serviceWithLeavesCut('k');
    const other = await kit.service();
    const held = await locks.acquire('k', { ttlMs: 30_000 });
    cut.on = true;
    await expect(held.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);

    const tried = await locks.tryAcquire('k', { ttlMs: 30_000 });

    expect(tried).not.toBeNull();
    expect(tried!.fence).toBeGreaterThan(held.fence);
    // Our old entry's leave is still being retried, and never got through.
    await eventually(() => cut.refused >= 2);
    const state = await other.inspect('k');
    expect(state?.holders.map((holder) => holder.fence)).toEqual([tried!.fence]);
    expect(state?.waiting).toBe(0);
    expect(await other.tryAcquire('k')).toBeNull();
    cut.on = false;
    await tried!.release();
    expect((await other.inspect('k'))?.held).toBe(false);
  });

  it("another process's holder still blocks the try; our waiter's entry stays until its leave", async () => {
    const { locks, cut } = await serviceWithLeavesCut('k');
    const other = await kit.service();
    const theirs = await other.acquire('k', { ttlMs: 30_000 });
    cut.on = true;
    // A waiter that gives up: its entry's leave is cut, so it stays in line.
    const gaveUp = await settle(locks.acquire('k', { timeoutMs: 300 }));
    expect(gaveUp).toBeInstanceOf(LockNotAcquiredError);
    await eventually(() => cut.refused >= 1);

    expect(await locks.tryAcquire('k')).toBeNull();

    // The refused try wrote nothing: the other holds, our waiter's entry is still there.
    const state = await other.inspect('k');
    expect(state?.holders.map((holder) => holder.fence)).toEqual([theirs.fence]);
    expect(state?.waiting).toBe(1);
    cut.on = false;
    await eventually(async () => (await other.inspect('k'))?.waiting === 0);
    await theirs.release();
  });

  it('a wait that drops our holder on its way out tells the waiter behind it, in another process, that it holds', async () => {
    const { locks, cut } = await serviceWithLeavesCut('k');
    const other = await kit.service();
    const held = await locks.acquire('k', { ttlMs: 30_000 });
    // Unless told, the waiter would look again only at its renewal, 10 s into its lease.
    const waiting = settle(other.acquire('k', { ttlMs: 30_000, timeoutMs: 6_000 }));
    await eventually(async () => (await other.inspect('k'))?.waiting === 1);
    cut.on = true;
    await expect(held.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);

    const ours = locks.acquire('k', { ttlMs: 30_000, timeoutMs: 20_000 });

    const theirs = (await waiting) as LockHandle;
    expect(theirs).not.toBeInstanceOf(Error);
    expect(cut.refused).toBeGreaterThanOrEqual(1);
    cut.on = false;
    await theirs.release();
    const next = await ours;
    expect(next.fence).toBeGreaterThan(theirs.fence);
    await next.release();
  });

  it("a document lock's try right after a release MongoDB did not confirm takes the document", async () => {
    const cut = { on: false, refused: 0 };
    const client = interceptedClient(await kit.client(), (target, args) => {
      const [filter, , options] = args as unknown as [Document, unknown, Document | undefined];
      // A document's leave: by our token, answered with the document before it.
      if (cut.on && options?.returnDocument === 'before' && '_lock.line.t' in filter) {
        cut.refused += 1;
        return Promise.reject(new MongoNetworkError('the leave never reached MongoDB'));
      }
      return target.findOneAndUpdate(...args);
    });
    const accounts = (await kit.client()).db(kit.mongo.dbName).collection('accounts');
    await accounts.insertOne({ _id: 'a' as unknown as Document['_id'], balance: 1 });
    const docs = (await kit.service({ client })).documents('accounts');
    const held = await docs.acquire('a', { ttlMs: 30_000 });
    cut.on = true;
    await expect(held.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);

    const tried = await docs.tryAcquire('a', { ttlMs: 30_000 });

    expect(tried).not.toBeNull();
    expect(tried!.fence).toBeGreaterThan(held.fence);
    expect(cut.refused).toBeGreaterThanOrEqual(1);
    cut.on = false;
    await tried!.release();
  });

  it('with no entry of ours on its way out, a mutex sends its usual short commands', async () => {
    const client = await kit.client({ monitorCommands: true });
    const sent: CommandStartedEvent[] = [];
    client.on('commandStarted', (event) => {
      if (event.commandName === 'findAndModify') sent.push(event);
    });
    const locks = await kit.service({ client });
    const first = await locks.acquire('k');
    await first.release();
    sent.splice(0);

    const tried = await locks.tryAcquire('k');
    await tried!.release();
    const waited = await locks.acquire('k');
    await waited.release();

    const [tryJoin, , waitJoin] = sent.map((event) => event.command);
    expect(tryJoin.update).toEqual(exclusiveTryJoinPipeline(false));
    expect(Object.keys(tryJoin.let as Document).sort()).toEqual(['d', 'g', 'h', 't']);
    expect(waitJoin.update).toEqual(exclusiveJoinPipeline(false));
    expect(Object.keys(waitJoin.let as Document).sort()).toEqual(['d', 'g', 'h', 't']);
  });
});
