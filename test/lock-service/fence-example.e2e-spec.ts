import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

// docs/guarantees.md, "Fencing tokens": the fenced write's filter matches unless a holder with a
// newer fence has written. It said `$not: { $gte: fence }`, which refused the holder's own
// second write too.
describe("guarantees.md's fenced write", () => {
  const kit = LockTestKit.forSuite();

  it("lets the holder write twice, and refuses an older holder's write after a newer one's", async () => {
    const locks = await kit.service();
    const client = await kit.client();
    const invoices = client
      .db(kit.mongo.dbName)
      .collection<{ _id: string; lastFence?: bigint }>('fenced_invoices');
    await invoices.insertOne({ _id: 'inv-1' });
    const write = async (fence: bigint, status: string) =>
      (
        await invoices.updateOne(
          // as in docs/guarantees.md
          { _id: 'inv-1', lastFence: { $not: { $gt: fence } } },
          { $set: { status, lastFence: fence } },
        )
      ).matchedCount;
    const first = await locks.acquire('invoice:inv-1');
    expect([await write(first.fence, 'charging'), await write(first.fence, 'paid')]).toEqual([
      1, 1,
    ]);
    await first.release();
    const second = await locks.acquire('invoice:inv-1');
    expect(second.fence).toBeGreaterThan(first.fence);
    expect(await write(second.fence, 'refunded')).toBe(1);
    // The first holder, paused past its lease, wakes up and writes: refused.
    expect(await write(first.fence, 'paid again')).toBe(0);
    await second.release();
  });
});
