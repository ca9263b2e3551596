// Closing a change stream while one of its commands is on its way must still end the
// server's cursor. With the driver's implicit session it did not: a getMore's reply ended the
// session before the close's killCursors got a connection (a busy pool), and an opening
// aggregate answered after the close found the session ended. Each stream has a session of
// its own now, ended once the stream has closed and its read has settled.
import type { ClientSession, MongoClient } from 'mongodb';
import type { LockService } from '../../../lib/lock.service';
import { eventually, LockTestKit, sleep } from '../lock-test-kit';
import { describeWithFailPoints, faultTools } from './kit';

jest.setTimeout(30_000);

describeWithFailPoints('a change stream closed with a command on its way', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  async function serverCursors(): Promise<() => Promise<number>> {
    const admin = await kit.client();
    return async () => {
      const status = await admin.db('admin').command({ serverStatus: 1 });
      return Number(status.metrics.cursor.open.total);
    };
  }

  /** The driver's own count of the client's explicit sessions not yet ended. */
  function explicitSessionsOf(client: MongoClient): () => number {
    const { activeSessions } = (client as unknown as { s: { activeSessions: Set<ClientSession> } })
      .s;
    return () => [...activeSessions].filter((session) => session.explicit).length;
  }

  /** `locks` waits for `key` (held by another service) until `leave` aborts it. */
  async function waitUntilAborted(locks: LockService, key: string) {
    const holder = await kit.service();
    const held = await holder.acquire(key, { ttlMs: 30_000 });
    const leave = new AbortController();
    const waiting = locks
      .acquire(key, { timeoutMs: 30_000, signal: leave.signal })
      .catch(() => undefined);
    return { held, leave, waiting };
  }

  it("its getMore, with the pool busy: the server's cursor ends", async () => {
    const cursorsOpen = await serverCursors();
    const before = await cursorsOpen();
    // One connection: the stream's awaiting getMore holds it, and the close queues behind.
    const client = await kit.client({ maxPoolSize: 1 });
    const locks = await kit.service({ client, streamIdleMs: 0 });
    const { held, leave, waiting } = await waitUntilAborted(locks, 'busy-close');
    await eventually(() => locks.diagnostics.waiters === 1 && locks.diagnostics.streamEstablished);
    await sleep(100);
    expect(await cursorsOpen()).toBe(before + 1);
    const busy = Array.from({ length: 20 }, () => locks.inspect('busy-close'));
    leave.abort();
    await Promise.all([waiting, ...busy]);
    await eventually(() => !locks.diagnostics.streamOpen);
    await eventually(async () => (await cursorsOpen()) === before, 5_000);
    await held.release();
  });

  it('the session of each stream ends with it', async () => {
    const client = await kit.client();
    const sessionsOpen = explicitSessionsOf(client);
    const locks = await kit.service({ client, streamIdleMs: 0 });
    for (const key of ['session:a', 'session:b']) {
      const { held, waiting } = await waitUntilAborted(locks, key);
      await eventually(
        () => locks.diagnostics.waiters === 1 && locks.diagnostics.streamEstablished,
      );
      expect(sessionsOpen()).toBe(1);
      await held.release();
      await (await waiting)?.release();
      await eventually(() => !locks.diagnostics.streamOpen);
      await eventually(() => sessionsOpen() === 0, 3_000);
    }
    expect(locks.diagnostics.streamsOpened).toBe(2);
  });

  it("a document lock's stream has a session of its own too, which ends with it", async () => {
    const client = await kit.client();
    const sessionsOpen = explicitSessionsOf(client);
    const collection = 'session_docs';
    await client
      .db(kit.mongo.dbName)
      .collection(collection)
      .insertMany([{ _id: 'a' }, { _id: 'b' }] as never[]);
    const holder = (await kit.service()).documents(collection);
    const waiter = (await kit.service({ client, streamIdleMs: 0 })).documents(collection);
    for (const id of ['a', 'b']) {
      const held = await holder.acquire(id);
      const waiting = waiter.acquire(id, { timeoutMs: 10_000 });
      // The waiter's stream holds the only explicit session open while it waits.
      await eventually(() => sessionsOpen() === 1);
      await sleep(100);
      expect(sessionsOpen()).toBe(1);
      await held.release();
      await (await waiting).release();
      await eventually(() => sessionsOpen() === 0, 3_000);
    }
  });

  it("its opening aggregate, answered after the close: the server's cursor ends", async () => {
    const cursorsOpen = await serverCursors();
    const before = await cursorsOpen();
    const appName = 'open-close';
    const locks = await kit.service({ client: await appClient(appName), streamIdleMs: 0 });
    // The stream's aggregate is answered 500 ms late: the waiter leaves meanwhile.
    const firedBefore = await failPoint(
      { times: 1 },
      { failCommands: ['aggregate'], appName, blockConnection: true, blockTimeMS: 500 },
    );
    const { held, leave, waiting } = await waitUntilAborted(locks, 'open-close');
    await eventually(() => locks.diagnostics.waiters === 1 && locks.diagnostics.streamOpen);
    await sleep(100);
    leave.abort();
    await waiting;
    await eventually(() => !locks.diagnostics.streamOpen);
    // The aggregate has been answered by now; its cursor must not stay open.
    await sleep(1_000);
    await eventually(async () => (await cursorsOpen()) === before, 3_000);
    await held.release();
    expect(await failPoint('off')).toBe(firedBefore + 1); // the aggregate was answered late
  });
});
