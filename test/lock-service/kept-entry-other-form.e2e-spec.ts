// Promised (docs/waiting.md, "Callers in the same process first, for a while"; docs/lock-modes.md,
// "One form per key"): once nobody holds or waits for a key, the next caller may use it in
// another form, and a release that kept its entry for a loop here leaves it before a request
// here in another form joins.
//
// The case: the kept entry's turn has passed and its leave is on its way in the background
// when a wait of the same service asks for the key as a semaphore. Its join may land before
// that leave and be refused for the form ("in use as an exclusive lock"): the refusal is sent
// again once our own leaves on the key are answered (`LineAcquirer.join`). The leave is delayed
// on the server (500 ms) so that the join always lands first.
import type { Collection } from 'mongodb';
import type { LockHandle } from '../../lib';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { heldInLoop } from './kept-entry-loop';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

describeWithFailPoints('a wait in another form right after our kept entry’s turn', () => {
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

  it('is not refused as "in use as an exclusive lock" by its own released entry', async () => {
    const a = await kit.service();
    const b = await kit.service({ client: await appClient('kept-other-form') });
    const held = await heldInLoop(a, b, 'form', line);
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
});
