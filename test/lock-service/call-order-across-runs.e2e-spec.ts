import type { Collection } from 'mongodb';
import type { LockHandle, LockService } from '../../lib';
import { LockTestKit, eventually } from './lock-test-kit';

jest.setTimeout(60_000);

/**
 * Promised (docs/waiting.md, "Callers in the same process first, for a while"; docs/engine-v2.md,
 * "Hand-over within a process"): with `localHandOff`, the callers still queued when an entry's
 * run ends stay ahead of anyone who calls later: "a process's callers on a key are served in
 * the order they called, across runs". The only exception named is a caller with a `scope`.
 *
 * The case: callers x0 and x1 are still queued behind the entry when its run ends, and callers
 * of the same process who called later are on their way to it (their call-order step under
 * way). The first still queued is told to make the next entry (`LineHandover.dissolved`), and
 * the others stay queued behind it, so the later callers queue behind them. Each follower used
 * to be told to join by itself, entering the call order again at its tail, behind the later
 * callers, the first of whom made the next entry.
 */
describe('engine v2: call order across runs within one process', () => {
  const kit = LockTestKit.forSuite();
  const v2 = (extra: Parameters<LockTestKit['service']>[0] = {}) =>
    kit.service({ engine: 'v2', ...extra });
  let lines: Collection;
  beforeEach(async () => {
    lines = (await kit.client()).db(kit.mongo.dbName).collection(`${kit.collectionName}_line`);
  });
  const lineLength = async (key: string) => {
    const doc = await lines.findOne({ _id: key as never });
    return ((doc?.line ?? []) as unknown[]).length;
  };

  /**
   * b's 16 callers take one entry's 16 places in turn (a's holder makes the entry wait first, so
   * all of them and x0, x1 are queued behind it before it holds). The holder of place
   * `burstAt` releases, and its code at once calls `burst` more on the key (as a batch would):
   * every one of them called after x0 and x1.
   */
  const round = async (a: LockService, b: LockService, key: string, burstAt: number) => {
    const held = await a.acquire(key);
    const served: string[] = [];
    const places = Array.from({ length: 16 }, () => b.acquire(key, { timeoutMs: 20_000 }));
    const early = ['x0', 'x1'].map((name) =>
      b.withLock(key, () => void served.push(name), { timeoutMs: 20_000 }),
    );
    await eventually(async () => b.diagnostics.waiters === 18 && (await lineLength(key)) === 2);
    await held.release();
    let late: Promise<unknown>[] = [];
    const fences: bigint[] = [];
    for (const [i, place] of places.entries()) {
      const handle: LockHandle = await place;
      fences.push(handle.fence);
      served.push(`c${i}`);
      const releasing = handle.release();
      if (i === burstAt) {
        late = Array.from({ length: 3 }, (_, j) =>
          b.withLock(key, () => void served.push(`y${j}`), { timeoutMs: 20_000 }),
        );
      }
      await releasing;
    }
    await Promise.all([...early, ...late]);
    // All 16 places of one entry (else a loaded machine's pause ended the run by time: redo).
    const oneRun = fences.every((fence, i) => fence === fences[0] + BigInt(i));
    return { served, oneRun };
  };

  it('serves callers queued behind an entry before callers who called later, when its run ends by its 16th place', async () => {
    const a = await v2();
    const b = await v2();
    const expected = [
      ...Array.from({ length: 16 }, (_, i) => `c${i}`),
      'x0',
      'x1',
      'y0',
      'y1',
      'y2',
    ];
    for (const burstAt of [13, 14]) {
      for (let attempt = 1; ; attempt++) {
        const { served, oneRun } = await round(a, b, `order-${burstAt}-${attempt}`, burstAt);
        if (!oneRun && attempt < 5) continue;
        expect(oneRun).toBe(true);
        expect(served).toEqual(expected);
        break;
      }
    }
  });
});
