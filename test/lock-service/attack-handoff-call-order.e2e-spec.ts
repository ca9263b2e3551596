import type { Collection } from 'mongodb';
import type { LockHandle, LockService } from '../../lib';
import { LockTestKit, eventually } from './lock-test-kit';

jest.setTimeout(60_000);

/**
 * Promised (docs/waiting.md, "Callers in the same process first, for a while"; docs/engine-v2.md,
 * "Hand-over within a process"): with `localHandOff`, callers still queued when an entry's run
 * ends "join again in the order they called ... So a process's callers on a key are served in
 * the order they called, across runs". The only exception named is a caller with a `scope`.
 *
 * What happens instead: callers queued behind the entry (x0, x1 below) are served after callers
 * of the same process who called later, all exclusive, unscoped, with no abort and no timeout.
 * A caller's step in the call order (`LineAcquirer.join`, `joinsInCallOrder.run`) ends as soon
 * as it queues behind the entry (`LineHandover.follow`); when the entry's run ends
 * (`LineHandover.dissolved`, here as its 16th place is handed in `handOn`), each follower is
 * told to join and enters the call order again, at its tail: behind every caller who called
 * after it but whose own step had not yet reached `follow` (it was still waiting, a few
 * microtasks, for the steps ahead to settle). The first of those later callers opens the next
 * entry, and the earlier callers queue behind it and all its followers.
 * From lib/line-acquirer.ts (`join`: `if (following) return { following }`, then `continue` in
 * `acquire`) and lib/line-handover.ts (`dissolved`: every follower told to join itself).
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
