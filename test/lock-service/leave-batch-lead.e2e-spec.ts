// Leaves of one key asked for while one of its leaves is on its way go together after it, and
// name their write in `lead` by a name of its own. Named by its first token, a write whose first
// token had already left (a retry of a leave that landed unanswered) would set `lead` to the value
// it had: not in the change's updatedFields, heard by no process, though it made a waiter holder.
import { randomBytes } from 'node:crypto';
import type { MongoClient } from 'mongodb';
import type { LineCollection } from '../../lib/store/line/line-commands';
import { joinLine } from '../../lib/store/line/line-commands';
import type { LineDocument, LineKind } from '../../lib/store/line/line-document';
import type { LineChange, LineWatch } from '../../lib/store/line/line-events';
import { watchLines } from '../../lib/store/line/line-events';
import { LineStore } from '../../lib/store/line/line-store';
import { LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

const kit = LockTestKit.forSuite();
const streams: LineWatch[] = [];
afterEach(async () => {
  await Promise.all(streams.splice(0).map((stream) => stream.close()));
});

const token = () => randomBytes(12).toString('base64url');
const semaphore = (weight: number): LineKind => ({ mode: 'permits', permits: 10, weight });

it('a batch whose first token already left still wakes the process it made holder', async () => {
  const client: MongoClient = await kit.client();
  const collection: LineCollection = client
    .db(kit.mongo.dbName)
    .collection<LineDocument>(kit.collectionName, { writeConcern: { w: 'majority' } });
  const store = new LineStore(collection, { operationTimeoutMs: 5_000, idleRetentionMs: 60_000 });
  const join = (t: string, holderId: string, weight: number) =>
    joinLine(collection, {
      key: 'k',
      token: t,
      holderId,
      ttlMs: 30_000,
      kind: semaphore(weight),
      onlyIfHolds: false,
      idleRetentionMs: 60_000,
    });
  // Q holds 5 permits, we (A) hold 1 + 1, and P's Z waits for 5: it holds once both of ours left.
  for (let i = 0; i < 5; i += 1) await join(token(), 'Q', 1);
  const t1 = token();
  const t5 = token();
  const z = token();
  await join(t1, 'A', 1);
  await join(t5, 'A', 1);
  expect(await join(z, 'P', 5)).toMatchObject({ joined: true, holds: false });

  const heardByP: LineChange[] = [];
  const watch = watchLines(collection, 'P', (change) => heardByP.push(change));
  streams.push(watch);
  await watch.opened;

  // t1 leaves (its reply, say, lost): `lead` is `* t1`, Z still waits.
  expect(await store.leave('k', t1)).toMatchObject({ left: true });
  // Its retry and t5's leave are asked for while another leave is on its way (of an entry not
  // in line: it writes nothing): they go after it, as one write, t1 first.
  const [, retry, left] = await Promise.all([
    store.leave('k', token()),
    store.leave('k', t1),
    store.leave('k', t5),
  ]);
  expect(retry.left).toBe(false);
  expect(left.left).toBe(true);
  // The write made Z holder (its reply names it) ...
  expect(left.holders.map((holder) => holder.t)).toContain(z);
  // ... and P's stream must hear it.
  await sleep(2_000);
  const zHolds = heardByP.some((change) => change.holders.some((holder) => holder.t === z));
  expect(zHolds).toBe(true);
});
