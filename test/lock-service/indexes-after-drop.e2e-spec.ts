// The lock collection dropped (or its database): its TTL index, which deletes idle lock
// documents, went with it. It is made again when the change stream reports the drop, and
// retried until MongoDB takes it (a database still being dropped refuses it for a while).
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { eventually, LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

describeWithFailPoints('the lock collection dropped under a running service', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('makes its TTL index again, retrying while MongoDB refuses it', async () => {
    const appName = 'indexes-after-drop';
    const locks = await kit.service({ client: await appClient(appName) });
    await (await locks.acquire('dropped:held')).release();
    const client = await kit.client();
    const lines = client.db(kit.mongo.dbName).collection(`${kit.collectionName}_line`);
    const refusedBefore = await failPoint(
      { times: 2 },
      { failCommands: ['createIndexes'], appName, errorCode: 215 },
    );
    await lines.drop();
    const ttlIndex = async () =>
      (
        await lines
          .listIndexes()
          .toArray()
          .catch(() => [])
      ).find((i) => i.name === 'gcAt_ttl');
    await eventually(async () => (await ttlIndex()) !== undefined, 15_000);
    expect(await ttlIndex()).toMatchObject({ key: { gcAt: 1 }, expireAfterSeconds: 0 });
    // Both refusals were taken, and the index still made.
    expect((await failPoint('off')) - refusedBefore).toBe(2);
  });
});
