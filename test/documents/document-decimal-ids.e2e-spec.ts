// Decimal128 ids of one value in two forms (`1.50`, `1.5`) name one document to MongoDB
// (decimals compare by value; the unique `_id` index refuses the second): they are one key, so
// a nested lock re-enters and a waiter keyed by either form hears the release's change event.
import { firstValueFrom } from 'rxjs';
import { Decimal128 } from 'mongodb';
import type { Collection, Document } from 'mongodb';
import { LockTestKit, listeningWhileHeld, settle } from '../lock-service/lock-test-kit';
import { LOAD_SLACK_MS } from '../support/load-slack';

jest.setTimeout(60_000);

describe('Decimal128 ids in two forms of one value', () => {
  const kit = LockTestKit.forSuite();
  let seq = 0;
  let collectionName: string;
  let docs: Collection<Document>;

  beforeEach(async () => {
    seq += 1;
    collectionName = `decimal_ids_${seq}`;
    const client = await kit.client();
    docs = client.db(kit.mongo.dbName).collection<Document>(collectionName);
    await docs.insertOne({ _id: Decimal128.fromString('1.50') as never, n: 0 });
  });

  it('MongoDB finds the document by either form', async () => {
    expect(await docs.findOne({ _id: Decimal128.fromString('1.5') })).toMatchObject({ n: 0 });
  });

  it('withLock re-enters for Decimal128 1.50 and 1.5', async () => {
    const locks = (await kit.service({ shutdownGraceMs: 200 })).documents(collectionName);
    const result = await settle(
      locks.withLock(Decimal128.fromString('1.50'), () =>
        locks.withLock(Decimal128.fromString('1.5'), () => 'inner', { timeoutMs: 500 }),
      ),
    );
    // Today: LockNotAcquiredError, the inner call waits for its own enclosing lock.
    expect(result).toBe('inner');
  });

  it('a waiter naming 1.5 is woken by the release of the document stored as 1.50', async () => {
    const holder = (await kit.service({ shutdownGraceMs: 200 })).documents(collectionName);
    const client = await kit.client({ monitorCommands: true });
    const waiter = (
      await kit.service({ client, shutdownGraceMs: 200, safetyPollIntervalMs: 60_000 })
    ).documents(collectionName);
    const lock = await holder.acquire(Decimal128.fromString('1.5'), { ttlMs: 20_000 });
    const listening = listeningWhileHeld(client, collectionName);
    const woken = firstValueFrom(waiter.waitForRelease(Decimal128.fromString('1.5')));
    await listening;
    const freedAt = performance.now();
    await lock.release();
    await woken;
    // Today the event's key ("1.50", the stored form) is not the waiter's ("1.5"): it waits for
    // the lease end (20 s).
    expect(performance.now() - freedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
  });
});
