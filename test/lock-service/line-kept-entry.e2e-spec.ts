import type { Collection, CommandStartedEvent, CommandSucceededEvent } from 'mongodb';
import type { LockHandle, LockService } from '../../lib';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { heldInLoop } from './kept-entry-loop';
import { LockTestKit, countCommands, eventually } from './lock-test-kit';

jest.setTimeout(60_000);

/**
 * A loop here that takes a contended key again right after releasing it: the released entry is
 * kept until the event loop's next turn and taken over by the loop's next call without a write
 * (`localHandOff`, `line-handover.ts`).
 */
describe('engine v2: an entry kept for a loop in the same process', () => {
  const kit = LockTestKit.forSuite();
  const v2 = (extra: Parameters<LockTestKit['service']>[0] = {}) =>
    kit.service({ engine: 'v2', ...extra });
  const line = lineReader(kit);
  const wait = { timeoutMs: 20_000 };

  const loopingHolder = (a: LockService, b: LockService, key: string) =>
    heldInLoop(a, b, key, line);
  /** b's hold in a loop, and a's wait queued behind it: b's release keeps its entry. */
  const loopingHolderAndWaiter = async (a: LockService, b: LockService, key: string) => {
    const held = await loopingHolder(a, b, key);
    const fromA = a.acquire(key, wait);
    await eventually(async () => (await line(key)).length === 2);
    return { held, fromA };
  };

  /**
   * b asks again only after its last leave was answered and a turn passed (not at once: asked in
   * the turn that answered a leave, it would count as a loop), waits behind `taken`, and holds by
   * its release: b's own release then writes before it resolves, keeping nothing.
   */
  const askedOnceLeavesOnRelease = async (b: LockService, taken: LockHandle, key: string) => {
    await eventually(async () => (await line(key)).length === 1);
    await new Promise((resolve) => setImmediate(resolve));
    const fromB = b.acquire(key, wait);
    await eventually(async () => (await line(key)).length === 2);
    await taken.release();
    await (await fromB).release();
    expect(await line(key)).toEqual([]);
  };

  it('hands a loop’s next call the entry its last one released, with the next fence and no write', async () => {
    const [a, b] = [await v2(), await v2()];
    const held = await loopingHolder(a, b, 'loop');
    await held.release();
    const next = await b.acquire('loop', wait);
    // The same entry (a join would take a fence at least 16 on): nothing was written.
    expect(next.fence).toBe(held.fence + 1n);
    await next.release();
  });

  it('lets a kept entry nobody takes leave at the next turn: a process waiting gets the key', async () => {
    const [a, b] = [await v2(), await v2()];
    const { held, fromA } = await loopingHolderAndWaiter(a, b, 'left');
    await held.release();
    const startedAt = performance.now();
    const taken = await fromA;
    // Told by the leave's change event, not by b's lease (30 s) running out.
    expect(performance.now() - startedAt).toBeLessThan(5_000);
    await askedOnceLeavesOnRelease(b, taken, 'left');
  });

  it('forgets a loop whose release was not kept (its run had ended): a later release writes', async () => {
    const [a, b] = [await v2(), await v2()];
    const { held, fromA } = await loopingHolderAndWaiter(a, b, 'ended-run');
    // The entry's run (RUN_MS, 50 ms from its first hold) ends: its release leaves the line.
    await new Promise((resolve) => setTimeout(resolve, 120));
    await held.release();
    const taken = await fromA;
    await askedOnceLeavesOnRelease(b, taken, 'ended-run');
  });

  it('hands a kept entry to a try here', async () => {
    const [a, b] = [await v2(), await v2()];
    const held = await loopingHolder(a, b, 'tried');
    await held.release();
    const tried = await b.tryAcquire('tried');
    expect(tried?.fence).toBe(held.fence + 1n);
    await tried!.release();
  });

  it('lets a kept entry leave before a try here in another mode joins', async () => {
    const [a, b] = [await v2(), await v2()];
    const held = await loopingHolder(a, b, 'shared');
    await held.release();
    const shared = await b.tryAcquire('shared', { mode: 'shared' });
    // Not refused by our own kept entry: it left first.
    expect(shared).not.toBeNull();
    expect(shared!.fence).toBeGreaterThan(held.fence + 1n);
    expect(await line('shared')).toEqual([b.holderId]);
    await shared!.release();
  });

  it('holds a kept entry’s leave back for forceRelease’s command: the waiter then holds undisturbed', async () => {
    const client = await kit.client({ monitorCommands: true });
    const commands = countCommands(client);
    const [a, b] = [await v2(), await v2({ client })];
    // A loaded machine can miss the loop's turn, and then the release writes: run again.
    for (let round = 0; round < 3; round += 1) {
      const key = `forced:${round}`;
      const { held, fromA } = await loopingHolderAndWaiter(a, b, key);
      commands.reset();
      await held.release();
      const kept = !commands.names.includes('findAndModify');
      // In the same turn, while the entry is kept: its leave, sent first, would let a hold, and
      // the command would then remove a's entry.
      await b.forceRelease(key);
      const taken = await fromA;
      if (!kept) {
        await taken.release().catch(() => undefined);
        continue;
      }
      expect(await line(key)).toEqual([a.holderId]);
      expect(taken.lost).toBe(false);
      await taken.release();
      return;
    }
    throw new Error('no round kept its entry');
  });

  it('leaves a kept entry when the service closes', async () => {
    const [a, b] = [await v2(), await v2()];
    const held = await loopingHolder(a, b, 'closed');
    await held.release();
    await b.close();
    expect(await line('closed')).toEqual([]);
  });

  it('keeps nothing for a process that does not ask again at once: the release writes', async () => {
    const [a, b] = [await v2(), await v2()];
    const first = await a.acquire('once');
    const fromB = b.acquire('once', wait);
    await eventually(async () => (await line('once')).length === 2);
    await first.release();
    const held = await fromB;
    await held.release();
    expect(await line('once')).toEqual([]);
  });
});

describeWithFailPoints('engine v2: a kept entry, under fail points', () => {
  const kit = LockTestKit.forSuite();
  const { delayNext, appClient, failPoint } = faultTools(kit);
  const line = lineReader(kit);

  it('a wait here in another mode whose deadline passes while the kept entry leaves joins after it, as a try does', async () => {
    const a = await kit.service({ engine: 'v2' });
    const client = await appClient('kept-late', { monitorCommands: true });
    const b = await kit.service({ engine: 'v2', client });
    const held = await heldInLoop(a, b, 'late-join', line);
    // b's findAndModify commands from the release on: the kept entry's leave first.
    const writes: { startedAt: number; answeredAt?: number }[] = [];
    const byRequest = new Map<number, { startedAt: number; answeredAt?: number }>();
    client.on('commandStarted', (event: CommandStartedEvent) => {
      if (event.commandName !== 'findAndModify') return;
      writes.push({ startedAt: performance.now() });
      byRequest.set(event.requestId, writes.at(-1)!);
    });
    client.on('commandSucceeded', (event: CommandSucceededEvent) => {
      const write = byRequest.get(event.requestId);
      if (write) write.answeredAt = performance.now();
    });
    // b's next findAndModify, the kept entry's leave, reaches MongoDB 600 ms late.
    const fired = await delayNext('kept-late', 'findAndModify', 600);
    await held.release();
    const calledAt = performance.now();
    // Slower than its timeoutMs, not than a late reply may be: it does no worse than a try.
    const shared = await b.acquire('late-join', { mode: 'shared', timeoutMs: 100 });
    // The call's deadline passed while the leave was held up; its join went after that reply.
    expect(writes[0].answeredAt).toBeGreaterThan(calledAt + 100);
    expect(writes[1].startedAt).toBeGreaterThanOrEqual(writes[0].answeredAt!);
    expect(await b.inspect('late-join')).toMatchObject({ held: true });
    expect(await line('late-join')).toHaveLength(1);
    await shared.release();
    expect(await failPoint('off')).toBe(fired + 1);
  });

  it('a try here in another mode waits for the kept entry’s leave, however slow, before it joins', async () => {
    const a = await kit.service({ engine: 'v2' });
    const b = await kit.service({ engine: 'v2', client: await appClient('kept-leave') });
    const held = await heldInLoop(a, b, 'slow-leave', line);
    // b's next findAndModify, the kept entry's leave, reaches MongoDB 300 ms late.
    await delayNext('kept-leave', 'findAndModify', 300);
    await held.release();
    // Joined before that leave landed, the try would find our own entry holding: refused.
    const shared = await b.tryAcquire('slow-leave', { mode: 'shared' });
    expect(shared).not.toBeNull();
    await shared!.release();
  });
});

/**
 * The holder ids of a key's line as stored, by a client connected before each test (so the read
 * is sent at once, in the caller's turn).
 */
function lineReader(kit: LockTestKit): (key: string) => Promise<string[]> {
  let lines: Collection;
  beforeEach(async () => {
    lines = (await kit.client()).db(kit.mongo.dbName).collection(`${kit.collectionName}_line`);
  });
  return async (key) => {
    const doc = await lines.findOne({ _id: key as never });
    return ((doc?.line ?? []) as { h: string }[]).map((entry) => entry.h);
  };
}
