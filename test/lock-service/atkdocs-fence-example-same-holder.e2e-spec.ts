import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

// docs/guarantees.md, "Fencing tokens": the filter `{ lastFence: { $not: { $gte: lock.fence } } }`
// is said to match "only while no holder with a newer fence has written". It also refuses the
// holder's own second write (same fence), so a lock-protected job that writes twice, or retries
// its write, is told "a newer lock holder has written" while it still holds the only lock.
// `$gt` is the filter the comment describes.
describe("guarantees.md's fenced write", () => {
  const kit = LockTestKit.forSuite();

  it('lets the current holder write twice under one lock', async () => {
    const locks = await kit.service();
    const client = await kit.client();
    const invoices = client.db(kit.mongo.dbName).collection<{ _id: string }>('fenced_invoices');
    await invoices.insertOne({ _id: 'inv-1' });
    const matched = await locks.withLock('invoice:inv-1', async (lock) => {
      const write = async (status: string) =>
        (
          await invoices.updateOne(
            // as in docs/guarantees.md
            { _id: 'inv-1', lastFence: { $not: { $gte: lock.fence } } },
            { $set: { status, lastFence: lock.fence } },
          )
        ).matchedCount;
      return [await write('charging'), await write('paid')];
    });
    // No newer holder wrote: both writes should match.
    expect(matched).toEqual([1, 1]);
  });
});
