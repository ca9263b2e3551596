// Adversarial review (lock modes and the local hand-off), a defect found:
//
// Promised (docs/waiting.md, "Callers in the same process first, for a while"; docs/lock-modes.md,
// "One form per key"): a release that keeps its entry for a loop here resolves before its leave
// is written, and only "another process, or another LockService in this one, still sees the key
// held" meanwhile; "a request here for another mode ... makes the kept entry leave first"; and
// once nobody holds or waits for a key, "the next caller may use it in another form".
//
// What happens: when the kept entry's turn has passed, its leave is on its way in the background
// (`LineHandover.dissolved` -> `kept.leave()` -> `LineLeaves.inBackground`). A wait of this same
// service that asks for the key as a semaphore then finds no kept entry to let go, and
// `LineAcquirer.clearOurWay` (lib/line-acquirer.ts) does not wait for the leaves on their way
// out unless the call is a try (`request.timeoutMs === 0 ? hurried : undefined`): "its join goes
// alongside". For a join in another form that is wrong: a join that lands before our own leave
// is refused, and the call fails at once with InvalidLockOptionsError "is in use as an exclusive
// lock", a final error naming a use that is this caller's own released lock. A try in the same
// place waits for the leave and succeeds (line-kept-entry.e2e-spec.ts), so the two disagree.
//
// The leave is delayed on the server (500 ms) so that the join always lands first; without the
// delay the same happens whenever the join overtakes the leave on another connection.
import type { Collection } from 'mongodb';
import type { LockHandle, LockService } from '../../lib';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { LockTestKit, eventually } from './lock-test-kit';

jest.setTimeout(60_000);

describeWithFailPoints(
  'attack (modes): a wait in another form right after our kept entry’s turn',
  () => {
    const kit = LockTestKit.forSuite();
    const { delayNext, appClient, failPoint } = faultTools(kit);
    let lines: Collection;
    beforeEach(async () => {
      lines = (await kit.client()).db(kit.mongo.dbName).collection(`${kit.collectionName}_line`);
    });
    const line = async (key: string) =>
      (((await lines.findOne({ _id: key as never }))?.line ?? []) as { h: string }[]).map(
        (entry) => entry.h,
      );

    /** `b` holds `key` in a loop, after waiting behind `a`: its release keeps its entry. */
    async function heldInLoop(a: LockService, b: LockService, key: string): Promise<LockHandle> {
      const first = await b.acquire(key);
      const fromA = a.acquire(key, { timeoutMs: 20_000 });
      await eventually(async () => (await line(key)).length === 2);
      await first.release();
      // Asked within the turn of its release's reply: a loop.
      const fromB = b.acquire(key, { timeoutMs: 20_000 });
      await eventually(async () => (await line(key)).length === 2);
      await (await fromA).release();
      return fromB;
    }

    it('is not refused as "in use as an exclusive lock" by its own released entry', async () => {
      const a = await kit.service();
      const b = await kit.service({ client: await appClient('kept-other-form') });
      const held = await heldInLoop(a, b, 'form');
      // b's next findAndModify, the kept entry's leave, reaches MongoDB 500 ms late.
      const fired = await delayNext('kept-other-form', 'findAndModify', 500);
      await held.release();
      // The kept entry's turn passes: nobody here took it, so its leave is sent now.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      // Nobody holds or waits for the key but that released entry, which is leaving.
      const outcome = await b.acquire('form', { permits: 2, timeoutMs: 10_000 }).then(
        (handle) => ({ handle }),
        (error: unknown) => ({ error }),
      );
      // The delayed command was the kept entry's leave, so the fault did what the test says.
      expect(await failPoint('off')).toBe(fired + 1);
      expect('error' in outcome ? String(outcome.error) : 'acquired').toBe('acquired');
      const { handle } = outcome as { handle: LockHandle };
      expect(handle.permits).toEqual({ of: 2, held: 1 });
      expect(await b.inspect('form')).toMatchObject({ mode: 'semaphore', permits: 2 });
      await handle.release();
    });
  },
);
