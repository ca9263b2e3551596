import { getEventListeners } from 'node:events';
import { isDeepStrictEqual } from 'node:util';
import type { MongoClient } from 'mongodb';
import { firstValueFrom, toArray } from 'rxjs';
import type { LockEvent } from '../../lib/interfaces';
import { RUN_MS } from '../../lib/line-handover';
import { FENCES_PER_ENTRY } from '../../lib/store/line/line-document';
import { LINE_STATE_PROJECTION } from '../../lib/store/line/line-state';
import { LOAD_SLACK_MS } from '../support/load-slack';
import {
  answerTo,
  countCommands,
  eventually,
  listeningWhileHeld,
  LockTestKit,
  sleep,
} from './lock-test-kit';

jest.setTimeout(60_000);

describe('LockService waiting', () => {
  const kit = LockTestKit.forSuite();

  it('serves many local waiters in FIFO order through one change stream', async () => {
    const holder = await kit.service();
    const client = await kit.client({ monitorCommands: true });
    const commands = countCommands(client);
    const locks = await kit.service({ client });
    const first = await holder.acquire('queue', { ttlMs: 60_000 });
    const order: number[] = [];
    const waiters = [0, 1, 2, 3, 4].map((index) =>
      locks.withLock('queue', async () => void order.push(index), { timeoutMs: 30_000 }),
    );
    await eventually(() => locks.diagnostics.waiters === 5 && locks.diagnostics.streamOpen);
    await first.release();
    await Promise.all(waiters);

    expect(order).toEqual([0, 1, 2, 3, 4]);
    // The one stream is the service's, open from start() to close().
    expect(locks.diagnostics.streamsOpened).toBe(1);
    expect(commands.names.filter((name) => name === 'aggregate')).toHaveLength(1);
  });

  it('acquire$ unsubscribed before it holds leaves no waiter or lock behind', async () => {
    const holder = await kit.service();
    const locks = await kit.service();
    const held = await holder.acquire('cancel-me');
    const subscription = locks.acquire$('cancel-me', { timeoutMs: 30_000 }).subscribe();
    await eventually(() => locks.diagnostics.waiters === 1 && locks.diagnostics.streamOpen);
    subscription.unsubscribe();
    await eventually(() => locks.diagnostics.waiters === 0);
    // Its place in the key's line is withdrawn too (one write, sent when it left).
    await eventually(async () => (await locks.inspect('cancel-me'))?.waiting === 0, 3_000);
    await held.release();
    await sleep(200);
    // Nobody took it after the release: still free, and no entry of the waiter is left in line.
    const state = await locks.inspect('cancel-me');
    expect(state).toMatchObject({ held: false, holderId: null, waiting: 0 });
    const [raw] = await kit.rawLocks();
    expect(raw.line).toEqual([]);
    // A free key's fence shows how far tokens went: the waiter's join took a number too.
    expect(state!.fence).toBeGreaterThan(held.fence);
  });

  it('acquire$ emits the handle once and completes', async () => {
    const locks = await kit.service();
    const handles = await firstValueFrom(locks.acquire$('observable').pipe(toArray()));
    expect(handles).toHaveLength(1);
    expect(handles[0].key).toBe('observable');
    await handles[0].release();
  });

  it('an aborted signal cancels the wait with its reason and nothing is taken', async () => {
    const holder = await kit.service();
    const locks = await kit.service();
    const held = await holder.acquire('abortable');
    const controller = new AbortController();
    const reason = new Error('user gave up');
    const waiting = locks.acquire('abortable', { timeoutMs: 30_000, signal: controller.signal });
    await eventually(() => locks.diagnostics.waiters === 1);
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(locks.diagnostics.waiters).toBe(0);
    await expect(locks.acquire('other', { signal: controller.signal })).rejects.toBe(reason);
    expect(await locks.inspect('other')).toBeNull();
    await held.release();
  });

  it("leaves no listener on a caller's signal once its calls are over, however they ended", async () => {
    const holder = await kit.service();
    const locks = await kit.service();
    const controller = new AbortController();
    const { signal } = controller;
    const held = await holder.acquire('shared-signal');
    // Several waits on one request's signal, key locks and a document lock: they share a link.
    const waits = [1, 2, 3].map(() =>
      locks.acquire('shared-signal', { timeoutMs: 30_000, signal }).then((h) => h.release()),
    );
    const timedOut = locks.acquire('shared-signal', { timeoutMs: 200, signal });
    const client = await kit.client();
    await client
      .db(kit.mongo.dbName)
      .collection('signal_docs')
      .insertOne({ _id: 'd' } as never);
    const documents = locks.documents('signal_docs');
    const docHeld = await documents.acquire('d');
    const docWait = documents.acquire('d', { timeoutMs: 30_000, signal });
    await expect(timedOut).rejects.toThrow();
    expect(getEventListeners(signal, 'abort').length).toBeGreaterThan(0);
    await held.release();
    await Promise.all(waits);
    await docHeld.release();
    await (await docWait).release();
    const free = await locks.tryAcquire('free', { signal });
    await free?.release();
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('waitForRelease emits when the holder releases', async () => {
    const holder = await kit.service();
    const client = await kit.client({ monitorCommands: true });
    const watcher = await kit.service({ client, safetyPollIntervalMs: 600_000 });
    const held = await holder.acquire('watched', { ttlMs: 30_000 });
    let released = false;
    const listening = listeningWhileHeld(client, `${kit.collectionName}_line`);
    const freed = firstValueFrom(watcher.waitForRelease('watched')).then(() => (released = true));
    // Its look saw the key held and its stream is open: only a wake-up can end the wait now.
    await listening;
    expect(released).toBe(false);
    const releasedAt = performance.now();
    await held.release();
    await freed;
    expect(released).toBe(true);
    // Not woken, it waits for the lease end (30 s) or its safety poll (10 min).
    expect(performance.now() - releasedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
  });

  it('waitForRelease does not emit when our release grants the key to a caller waiting here', async () => {
    const client = await kit.client({ monitorCommands: true });
    const locks = await kit.service({ client, safetyPollIntervalMs: 600_000 });
    const lines = `${kit.collectionName}_line`;
    const first = await locks.acquire('handed', { ttlMs: 30_000 });
    const second = locks.acquire('handed', { ttlMs: 30_000, timeoutMs: 10_000 });
    const third = locks.acquire('handed', { ttlMs: 30_000, timeoutMs: 10_000 });
    await eventually(async () => (await locks.inspect('handed'))?.waiting === 1);
    await eventually(() => locks.diagnostics.waiters === 2);
    await first.release(); // to the second caller, within the lease
    const secondHandle = await second;
    await sleep(RUN_MS + 20); // the local run is over: the next release leaves the line
    // The third caller is in line behind the second's entry, not queued behind it here.
    await eventually(async () => (await locks.inspect('handed'))?.waiting === 1);
    let released = false;
    const listening = listeningWhileHeld(client, lines);
    const freed = firstValueFrom(locks.waitForRelease('handed')).then(() => (released = true));
    // Its look saw the key held and its stream is open: it hears the leave's change event.
    await listening;
    const lookedAgain = lookAnsweredAfterLeave(client, lines);
    await secondHandle.release(); // a leave: the third caller's entry, next in line, holds
    const thirdHandle = await third;
    expect(thirdHandle.fence).toBeGreaterThanOrEqual(secondHandle.fence + FENCES_PER_ENTRY);
    // Woken by that event, it looks again, sees the third caller hold and goes on waiting (an
    // emission instead ends this wait too, and fails below).
    await Promise.race([lookedAgain, freed]);
    expect((await locks.inspect('handed'))?.held).toBe(true);
    expect(released).toBe(false);
    await thirdHandle.release();
    await freed;
    expect(released).toBe(true);
  });

  it('waitForRelease emits when the lease runs out, and at once for a free key', async () => {
    const holder = await kit.service();
    const watcher = await kit.service();
    await holder.acquire('expiring', { ttlMs: 1_000 });
    const started = Date.now();
    await firstValueFrom(watcher.waitForRelease('expiring'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(800);
    await firstValueFrom(watcher.waitForRelease('never-locked'));
  });

  it('events$ reports acquisitions and releases with holder and fence', async () => {
    const observer = await kit.service();
    const locks = await kit.service();
    const seen: LockEvent[] = [];
    const subscription = observer.events$.subscribe((event) => seen.push(event));
    await eventually(() => observer.diagnostics.streamEstablished);
    const handle = await locks.acquire('evented');
    await handle.release();
    await eventually(() => seen.length >= 2);
    expect(seen.slice(0, 2)).toMatchObject([
      { type: 'acquired', key: 'evented', holderId: locks.holderId, fence: handle.fence },
      // A release event names no holder (docs/engine-v2.md).
      { type: 'released', key: 'evented', holderId: null },
    ]);
    const renewed = await locks.acquire('renewed', { renew: { intervalRatio: 0.1 }, ttlMs: 1_000 });
    await sleep(500);
    await renewed.release();
    await eventually(() => seen.length >= 4);
    // Renewals are filtered on the server: only the acquisition and the release arrive.
    expect(seen.filter((event) => event.key === 'renewed').map((event) => event.type)).toEqual([
      'acquired',
      'released',
    ]);
    subscription.unsubscribe();
  });

  it('events$ completes its subscribers when the service closes', async () => {
    const observer = await kit.service();
    let completed = false;
    observer.events$.subscribe({ complete: () => (completed = true) });
    await eventually(() => observer.diagnostics.streamEstablished);
    await observer.close();
    expect(completed).toBe(true);
    expect(observer.diagnostics.streamOpen).toBe(false);
    let lateCompleted = false;
    observer.events$.subscribe({ complete: () => (lateCompleted = true) });
    expect(lateCompleted).toBe(true);
  });
});

/**
 * Resolves once a look at `collection` as `inspect` and `waitForRelease` make it (a `find` with
 * their projection), sent after the next `findAndModify` on it was, is answered.
 */
function lookAnsweredAfterLeave(client: MongoClient, collection: string): Promise<void> {
  let leaveSent = false;
  return answerTo(client, (event) => {
    if (event.command[event.commandName] !== collection) return false;
    if (event.commandName === 'findAndModify') leaveSent = true;
    const { projection } = event.command;
    return (
      leaveSent &&
      event.commandName === 'find' &&
      isDeepStrictEqual(projection, LINE_STATE_PROJECTION)
    );
  });
}
