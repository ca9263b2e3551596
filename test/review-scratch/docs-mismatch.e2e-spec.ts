// D10-D13: behaviour on engine v2 that docs/document-locks.md describes otherwise.
import type { Collection, Document } from 'mongodb';
import { eventually } from '../lock-service/lock-test-kit';
import { scratchSuite, sleep } from './helpers';

jest.setTimeout(30_000);

describe('engine v2 document locks against docs/document-locks.md', () => {
  const { kit, state, service } = scratchSuite();

  it('D10 "An attempt that finds the document locked writes nothing and raises no change event"', async () => {
    const client = await kit.client();
    const stream = client.db(kit.mongo.dbName).collection(state.name).watch();
    const seen: string[] = [];
    stream.on('change', (change) => seen.push(change.operationType));
    await sleep(200);
    const holder = (await service()).documents(state.name);
    const other = (await service()).documents(state.name);
    const lock = await holder.acquire('a');
    await sleep(200);
    seen.length = 0;
    await other.acquire('a', { timeoutMs: 300 }).catch(() => undefined);
    await sleep(300);
    await stream.close();
    await lock.release();
    // Observed: ['update', 'update', ...]: the waiting entry's join and leave.
    expect(seen).toEqual([]);
  });

  it('D11 "a released or committed lock keeps [no token]"', async () => {
    const docs = (await service()).documents(state.name);
    const lock = await docs.acquire('a');
    const token = (lock as unknown as { inner: { ownerOf(key: string): string } }).inner.ownerOf(lock.key);
    await lock.commit({ $inc: { n: 1 } });
    const stored = (await state.docs.findOne({ _id: 'a' as never }))?._lock as Document;
    // Observed (f641894): { f, line: [], lead: '* <token>' }.
    expect(JSON.stringify(stored)).not.toContain(token);
  });

  it('D12 "One change stream per collection, opened only while someone waits (and streamIdleMs after)"', async () => {
    const docs = (await service({ streamIdleMs: 100 })).documents(state.name);
    const lock = await docs.acquire('a'); // nobody waits
    await lock.release();
    await sleep(1_000);
    // Observed: open (v2 opens it at the first acquire and keeps it until close).
    expect(docs.diagnostics.streamOpen).toBe(false);
  });

  it('D13 createIfMissing writes its fields into a document another writer inserted meanwhile', async () => {
    const client = await kit.client();
    const raw = client.db(kit.mongo.dbName).collection(state.name);
    const docs = (await service()).documents(state.name);
    await docs.inspect('x'); // makes the collection's v2 store
    const store = (docs as unknown as { lineLocks: { lines: { store: { collection: Collection } } } })
      .lineLocks.lines.store;
    const original = store.collection.findOneAndUpdate.bind(store.collection);
    let calls = 0;
    (store.collection as unknown as { findOneAndUpdate: unknown }).findOneAndUpdate = async (
      ...args: Parameters<typeof original>
    ) => {
      const result = await original(...args);
      calls += 1;
      // Between the join that found nothing and the upsert: the application inserts it.
      if (calls === 1) await raw.insertOne({ _id: 'new', owner: 'app' } as Document);
      return result;
    };
    const lock = await docs.acquire('new', { createIfMissing: { balance: 0, owner: 'lock' } });
    await lock.release();
    expect(lock.created).toBe(false);
    // Observed: { _id: 'new', owner: 'app', balance: 0 } ("An existing document is locked as it is").
    expect(await raw.findOne({ _id: 'new' as never }, { projection: { _lock: 0 } })).toEqual({
      _id: 'new',
      owner: 'app',
    });
  });

  it('(control) a waiting entry is counted while it waits', async () => {
    const holder = (await service()).documents(state.name);
    const other = (await service()).documents(state.name);
    const lock = await holder.acquire('a');
    const waiting = other.acquire('a', { timeoutMs: 5_000 });
    await eventually(async () => (await holder.inspect('a'))?.waiting === 1, 3_000);
    await lock.release();
    await (await waiting).release();
  });
});
