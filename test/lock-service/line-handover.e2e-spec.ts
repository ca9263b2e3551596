import { LockLostError, LockNotAcquiredError } from '../../lib/errors';
import type { LockHandle, LockService } from '../../lib';
import { RUN_MS } from '../../lib/line-handover';
import { LockTestKit, eventually, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

/**
 * Engine v2's hand-over within one process (`localHandOff`, on by default): callers queued
 * behind this process's waiting entry take it over one after another, without a write.
 */
describe('engine v2: hand-over within one process', () => {
  const kit = LockTestKit.forSuite();
  const v2 = (extra: Parameters<LockTestKit['service']>[0] = {}) =>
    kit.service({ engine: 'v2', ...extra });
  /** The key's line as stored: each entry's holder id, token and fence number. */
  const line = async (key: string) => {
    const lines = (await kit.client())
      .db(kit.mongo.dbName)
      .collection(`${kit.collectionName}_line`);
    const doc = await lines.findOne({ _id: key as never });
    const entries = (doc?.line ?? []) as { h: string; t: string; f: unknown }[];
    return { f: String(doc?.f), entries: entries.map(({ h, t, f }) => ({ h, t, f: String(f) })) };
  };
  const settled = (promise: Promise<unknown>) => {
    let done = false;
    void promise.then(
      () => (done = true),
      () => (done = true),
    );
    return () => done;
  };

  it('hands the entry to the callers queued behind it in call order, each with the next fence, with no write', async () => {
    const a = await v2();
    const b = await v2();
    const first = await a.acquire('batch');
    const calls = [0, 1, 2, 3].map(() => b.acquire('batch', { timeoutMs: 20_000 }));
    await eventually(async () => (await line('batch')).entries.length === 2);
    await sleep(200);
    // One entry for the four callers: the first joined, the others queued behind it here.
    const waitingLine = await line('batch');
    expect(waitingLine.entries.map((entry) => entry.h)).toEqual([a.holderId, b.holderId]);
    await first.release();
    const fences: bigint[] = [];
    for (const call of calls) {
      const handle = await call;
      fences.push(handle.fence);
      // The same entry throughout, and no join since: the document's fence number is unchanged.
      expect(await line('batch')).toEqual({ f: waitingLine.f, entries: [waitingLine.entries[1]] });
      await handle.release();
    }
    expect(fences.map((fence) => fence - fences[0])).toEqual([0n, 1n, 2n, 3n]);
    expect(fences[0]).toBeGreaterThan(first.fence);
    expect((await line('batch')).entries).toEqual([]);
  });

  it('passes to a caller who comes while it holds, within its run, with no write', async () => {
    const b = await v2();
    const first = await b.acquire('run');
    const before = await line('run');
    const second = b.acquire('run', { timeoutMs: 20_000 });
    await sleep(10);
    await first.release();
    const next = await second;
    expect(next.fence).toBe(first.fence + 1n);
    expect(await line('run')).toEqual(before);
    await next.release();
    expect((await line('run')).entries).toEqual([]);
    // The entry has left: a caller now joins the line (following it, it would wait for ever).
    const again = await b.acquire('run', { timeoutMs: 2_000 });
    expect((await line('run')).entries.map((entry) => entry.t)).not.toContain(before.entries[0].t);
    await again.release();
  });

  it('passes among its callers only during its run: after it, they wait behind the other processes', async () => {
    const [a, b, c] = [await v2(), await v2(), await v2()];
    const first = await a.acquire('fair');
    const b1 = b.acquire('fair', { timeoutMs: 20_000 });
    await eventually(async () => (await line('fair')).entries.length === 2);
    const b2 = b.acquire('fair', { timeoutMs: 20_000 });
    await sleep(100);
    await first.release();
    const held1 = await b1;
    // The run ends RUN_MS after its first holder began.
    await sleep(RUN_MS * 2);
    const fromC = c.acquire('fair', { timeoutMs: 20_000 });
    await eventually(async () => (await line('fair')).entries.length === 2);
    const b3 = b.acquire('fair', { timeoutMs: 20_000 });
    await eventually(async () => (await line('fair')).entries.length === 3);
    const [b2Done, b3Done] = [settled(b2), settled(b3)];
    await held1.release();
    const heldC = await fromC;
    await sleep(200);
    expect([b2Done(), b3Done()]).toEqual([false, false]);
    expect(heldC.fence).toBeGreaterThan(held1.fence);
    await heldC.release();
    // b3 joined before b2, whose followed entry ended its run and left.
    const third = await b3;
    expect(third.fence).toBeGreaterThan(heldC.fence);
    expect(b2Done()).toBe(false);
    await third.release();
    const last = await b2;
    expect(last.fence).toBeGreaterThan(third.fence);
    await last.release();
  });

  it('a queued caller that gives up sends nothing; when the entry it followed gives up, the next joins itself', async () => {
    const a = await v2();
    const b = await v2();
    const first = await a.acquire('given-up');
    const leader = b.acquire('given-up', { timeoutMs: 600 });
    await eventually(async () => (await line('given-up')).entries.length === 2);
    const impatient = b.acquire('given-up', { timeoutMs: 100 });
    const patient = b.acquire('given-up', { timeoutMs: 20_000 });
    const before = await line('given-up');
    await expect(impatient).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(await line('given-up')).toEqual(before);
    await expect(leader).rejects.toBeInstanceOf(LockNotAcquiredError);
    // The patient caller joined in its own entry, and the leader's left.
    await eventually(async () => {
      const { entries } = await line('given-up');
      return entries.length === 2 && entries[1].t !== before.entries[1].t;
    });
    await first.release();
    const handle = await patient;
    expect((await line('given-up')).entries).toHaveLength(1);
    await handle.release();
  });

  it('hands on no lease it does not know to be its own: when it was lost, the followers join themselves', async () => {
    const a = await v2();
    const b = await v2();
    const first = await a.acquire('lost');
    const b1 = b.acquire('lost', { timeoutMs: 20_000, ttlMs: 5_000 });
    await eventually(async () => (await line('lost')).entries.length === 2);
    // A shorter lease than the entry's: handed over, it would start without a renewal.
    const b2 = b.acquire('lost', { timeoutMs: 20_000, ttlMs: 2_000 });
    await sleep(100);
    await first.release();
    const held: LockHandle = await b1;
    // An operator takes the key away; the holder learns it at its renewal.
    expect(await a.forceRelease('lost')).toHaveLength(1);
    await expect(held.extend()).rejects.toBeInstanceOf(LockLostError);
    await held.release().catch(() => undefined);
    const next = await b2;
    // Its own entry, with a fence of a later join, not the lost entry's next one.
    expect(next.fence).toBeGreaterThan(held.fence + 1n);
    expect((await line('lost')).entries.map((entry) => entry.h)).toEqual([b.holderId]);
    await next.release();
  });

  it('with localHandOff false, every caller joins the line in its own entry', async () => {
    const a = await v2();
    const b: LockService = await v2({ localHandOff: false });
    const first = await a.acquire('off');
    const calls = [0, 1].map(() => b.acquire('off', { timeoutMs: 20_000 }));
    await eventually(async () => (await line('off')).entries.length === 3);
    await first.release();
    const one = await calls[0];
    await one.release();
    const two = await calls[1];
    expect(two.fence - one.fence).toBeGreaterThanOrEqual(16n);
    await two.release();
  });
});
