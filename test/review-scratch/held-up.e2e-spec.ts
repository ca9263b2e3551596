// Attacks that held up (these pass): kept as evidence for the review report.
import type { Collection, Document } from 'mongodb';
import { LockTestKit, eventually, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

describe('v2 document locks: attacks that held up', () => {
  const kit = LockTestKit.forSuite();
  let docs: Collection<Document>;
  let name: string;
  let seq = 0;
  beforeEach(async () => {
    seq += 1;
    name = `held_${seq}`;
    const client = await kit.client();
    docs = client.db(kit.mongo.dbName).collection(name);
    await docs.insertOne({ _id: 'a', n: 0 } as Document);
  });

  it('read-modify-write under contention from 3 services, both commit forms and releases: no lost update', async () => {
    const services = await Promise.all([1, 2, 3].map(() => kit.service({ engine: 'v2', shutdownGraceMs: 200 })));
    const all = services.map((s) => s.documents(name));
    let commits = 0;
    const until = performance.now() + 4_000;
    await Promise.all(
      all.flatMap((locks, i) =>
        [0, 1, 2].map(async (j) => {
          while (performance.now() < until) {
            const lock = await locks.acquire('a', { ttlMs: 2_000, timeoutMs: 10_000 });
            const n = lock.doc.n as number;
            await sleep(Math.random() * 3);
            const form = (i + j + commits) % 3;
            if (form === 0) await lock.commit({ $set: { n: n + 1 } });
            else if (form === 1) await lock.commit([{ $set: { n: n + 1 } }]);
            else {
              await lock.update({ $set: { n: n + 1 } });
              await lock.release();
            }
            commits += 1;
          }
        }),
      ),
    );
    expect((await docs.findOne({ _id: 'a' as never }))?.n).toBe(commits);
    console.log('commits', commits);
  });

  it('an update-document commit wakes the next live waiter past a dead entry (wallTime decode)', async () => {
    const holder = (await kit.service({ engine: 'v2' })).documents(name);
    const waiter = (await kit.service({ engine: 'v2', safetyPollIntervalMs: 60_000 })).documents(name);
    const lock = await holder.acquire('a', { ttlMs: 30_000 });
    const waiting = waiter.acquire('a', { ttlMs: 30_000, timeoutMs: 20_000 });
    await eventually(async () => (await holder.inspect('a'))?.waiting === 1, 5_000);
    await docs.updateOne({ _id: 'a' as never }, {
      $push: { '_lock.line': { $each: [{ t: 'dead', f: 1, e: new Date(0), h: 'gone' }], $position: 1 } },
    } as Document);
    const at = performance.now();
    await lock.commit({ $inc: { n: 1 } });
    const next = await waiting;
    expect(performance.now() - at).toBeLessThan(1_500);
    await next.release();
  });

  it('a waiter that times out leaves its entry', async () => {
    const holder = (await kit.service({ engine: 'v2' })).documents(name);
    const waiter = (await kit.service({ engine: 'v2' })).documents(name);
    const lock = await holder.acquire('a', { ttlMs: 30_000 });
    await expect(waiter.acquire('a', { ttlMs: 30_000, timeoutMs: 300 })).rejects.toThrow();
    await eventually(async () => ((await docs.findOne({ _id: 'a' as never }))?._lock as Document).line.length === 1, 3_000);
    await lock.release();
  });

  it('a tryAcquire on a held document writes nothing', async () => {
    const holder = (await kit.service({ engine: 'v2' })).documents(name);
    const other = (await kit.service({ engine: 'v2' })).documents(name);
    const lock = await holder.acquire('a');
    const before = await docs.findOne({ _id: 'a' as never });
    expect(await other.tryAcquire('a')).toBeNull();
    expect(await docs.findOne({ _id: 'a' as never })).toEqual(before);
    await lock.release();
  });

  it('update and commit of a holder whose entry ran out while a waiter has not renewed yet land nowhere', async () => {
    const holder = (await kit.service({ engine: 'v2' })).documents(name);
    const waiter = (await kit.service({ engine: 'v2' })).documents(name);
    const stale = await holder.acquire('a', { ttlMs: 1_000, renew: false });
    const waiting = waiter.acquire('a', { ttlMs: 30_000, timeoutMs: 20_000 });
    await sleep(1_050); // our entry is dead; the waiter's entry is first live (not yet renewed)
    await expect(stale.update({ $inc: { n: 1 } })).rejects.toThrow();
    const next = await waiting;
    expect((await docs.findOne({ _id: 'a' as never }))?.n).toBe(0);
    await next.release();
  });
});

describe('v2 document locks: expiring holders', () => {
  const kit = LockTestKit.forSuite();
  it('holders whose leases run out mid-work never lose an update (server-checked commits)', async () => {
    const client = await kit.client();
    const docs = client.db(kit.mongo.dbName).collection('exp');
    await docs.insertOne({ _id: 'a', n: 0 } as Document);
    const services = await Promise.all([1, 2, 3].map(() => kit.service({ engine: 'v2', shutdownGraceMs: 200 })));
    let landed = 0;
    let lost = 0;
    const until = performance.now() + 6_000;
    await Promise.all(
      services.flatMap((s, i) =>
        [0, 1].map(async (j) => {
          const locks = s.documents('exp');
          while (performance.now() < until) {
            const lock = await locks.acquire('a', { ttlMs: 1_000, renew: false, timeoutMs: 10_000 });
            const n = lock.doc.n as number;
            await sleep(Math.random() * 1_300);
            try {
              if ((i + j) % 2) await lock.commit({ $set: { n: n + 1 } });
              else await lock.commit([{ $set: { n: n + 1 } }]);
              landed += 1;
            } catch {
              lost += 1;
            }
          }
        }),
      ),
    );
    console.log('landed', landed, 'lost', lost);
    expect((await docs.findOne({ _id: 'a' as never }))?.n).toBe(landed);
  });
});
