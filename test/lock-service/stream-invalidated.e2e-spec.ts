// The lock collection dropped (or renamed, or its database dropped): MongoDB sends `invalidate`
// and closes the change stream's cursor, whose `tryNext()` then answers null at once, without
// I/O. Read on, such a loop never lets the event loop turn: the process would answer nothing.
import { LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

describe('a change stream invalidated by a drop of the lock collection', () => {
  const kit = LockTestKit.forSuite();

  it('does not freeze the process, and the stream opens again', async () => {
    const worker = kit.worker({ mode: 'hold', key: 'held-here', ttlMs: 30_000 });
    await worker.next('acquired');
    const client = await kit.client();
    const lines = client.db(kit.mongo.dbName).collection(`${kit.collectionName}_line`);
    await lines.drop();
    await sleep(2_000);
    worker.send({ type: 'ping' });
    const pong = await worker.next('pong', 5_000);
    expect(pong.streamOpen).toBe(true);
    // The drop took the TTL index that deletes idle lock documents: it is made again.
    const indexes = await lines.listIndexes().toArray();
    expect(indexes.find((index) => index.name === 'gcAt_ttl')).toMatchObject({
      key: { gcAt: 1 },
      expireAfterSeconds: 0,
    });
  });
});
