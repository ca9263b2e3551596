// A parked waiting process keeps its place in a key's line by one small write (see
// `keepReservation`), instead of a full attempt every few seconds.
import { BSON } from 'mongodb';
import type { Collection } from 'mongodb';
import { keepReservation } from '../../lib/store/holder-entries';
import type { LockCollection } from '../../lib/store/lock-document';
import { RESERVATION_TTL_MS } from '../../lib/store/lock-modes';
import { lockReleasePipeline } from '../../lib/store/lock-change-stream';
import { LockTestKit } from './lock-test-kit';

/** A lock document as these tests read it. */
interface KeyedLock {
  _id: string;
  waiting: Record<string, { expiresAt: Date }>;
}

const kit = LockTestKit.forSuite();
const key = 'keep:k';

async function setUp(
  waiting: Record<string, { expiresAt: Date }>,
  fields: Record<string, unknown> = {},
) {
  const client = await kit.client({ monitorCommands: true });
  const collection = client.db(kit.mongo.dbName).collection<KeyedLock>(kit.collectionName);
  const since = new Date(Date.now() - 1_000);
  const places = Object.fromEntries(
    Object.entries(waiting).map(([name, { expiresAt }]) => [
      name,
      { weight: 1000, since, expiresAt, holder: 'me' },
    ]),
  );
  await collection.insertOne({
    _id: key,
    owner: 'other-token',
    holder: 'other',
    expiresAt: new Date(Date.now() + 30_000),
    waiting: places,
    ...fields,
  } as never);
  const sizes: number[] = [];
  client.on('commandStarted', (event) => {
    if (event.commandName === 'findAndModify') sizes.push(BSON.calculateObjectSize(event.command));
  });
  return { collection, locks: collection as unknown as LockCollection, sizes };
}

const placeOf = async (collection: Collection<KeyedLock>, name: string) =>
  (await collection.findOne({ _id: key }))!.waiting[name];

describe('keeping a place in line', () => {
  it("renews a live place's lease by the server clock, in a command under 1 KB (a full attempt is 9.7 KB)", async () => {
    const { collection, locks, sizes } = await setUp({
      rme: { expiresAt: new Date(Date.now() + 2_000) },
      rother: { expiresAt: new Date(Date.now() + 2_000) },
    });
    const other = await placeOf(collection, 'rother');
    const before = Date.now();
    const remainingMs = await keepReservation(locks, key, 'rme');

    expect(remainingMs).toBeGreaterThan(RESERVATION_TTL_MS - 1_000);
    expect(remainingMs).toBeLessThanOrEqual(RESERVATION_TTL_MS);
    const place = await placeOf(collection, 'rme');
    expect(place.expiresAt.getTime()).toBeGreaterThanOrEqual(before + RESERVATION_TTL_MS - 1_000);
    expect(await placeOf(collection, 'rother')).toEqual(other); // nobody else's
    expect(sizes).toHaveLength(1);
    expect(sizes[0]).toBeLessThan(1024);
  });

  it('writes nothing for a place that ran out or was never there', async () => {
    const ended = new Date(Date.now() - 1);
    const { collection, locks } = await setUp({ rme: { expiresAt: ended } });
    expect(await keepReservation(locks, key, 'rme')).toBeUndefined();
    expect(await keepReservation(locks, key, 'rnobody')).toBeUndefined();
    expect(await keepReservation(locks, 'keep:missing', 'rme')).toBeUndefined();
    const doc = await collection.findOne({ _id: key });
    expect(Object.keys(doc!.waiting)).toEqual(['rme']);
    expect(await collection.findOne({ _id: 'keep:missing' })).toBeNull();
  });

  it('leaves a place the key is granted to, pending or lapsed, to the attempt', async () => {
    const live = { expiresAt: new Date(Date.now() + 2_000) };
    for (const expiresAt of [new Date(Date.now() + 5_000), new Date(Date.now() - 1)]) {
      const { collection, locks } = await setUp(
        { rme: live },
        { owner: 'grant:rme:5', grantedTo: 'rme', grantee: 'me', expiresAt },
      );
      expect(await keepReservation(locks, key, 'rme')).toBeUndefined();
      expect((await placeOf(collection, 'rme')).expiresAt).toEqual(live.expiresAt);
      await collection.deleteOne({ _id: key });
    }
  });

  it("wakes no waiter: the change passes no waiter's stream filter", async () => {
    const { collection, locks } = await setUp({ rme: { expiresAt: new Date(Date.now() + 2_000) } });
    const stream = collection.watch(lockReleasePipeline('me'));
    try {
      await stream.tryNext(); // opened
      await keepReservation(locks, key, 'rme');
      // A change the filter passes, after ours: the stream must deliver it first.
      await collection.updateOne({ _id: key }, { $set: { owner: null } });
      const change = await stream.next();
      expect(change).toMatchObject({
        operationType: 'update',
        updateDescription: { updatedFields: { owner: null } },
      });
    } finally {
      await stream.close();
    }
  });
});
