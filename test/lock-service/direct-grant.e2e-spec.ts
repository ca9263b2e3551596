// Direct grant (lib/store/direct-grant.ts): a release hands an exclusive lock to the oldest
// waiting process in the same write; that process confirms it with one small command, and
// nobody else hears of it.
import { BSON, Long } from 'mongodb';
import type { Collection, MongoClient } from 'mongodb';
import { firstValueFrom } from 'rxjs';
import { filter, take, toArray } from 'rxjs/operators';
import { attemptAcquire } from '../../lib/store/acquire-attempt';
import { LOAD_SLACK_MS } from '../support/load-slack';
import {
  FENCES_PER_LEASE,
  GRANT_LEASE_MS,
  grantToken,
  lastReservedFence,
} from '../../lib/store/direct-grant';
import { withdrawReservation } from '../../lib/store/holder-entries';
import { releaseLease } from '../../lib/store/release-lease';
import { renewLease } from '../../lib/store/renew-lease';
import type { LockCollection } from '../../lib/store/lock-document';
import type { ReservationUse } from '../../lib/store/lock-modes';
import { LOCAL_RUN_MS, MAX_LOCAL_TRANSFERS } from '../../lib/waiting/key-queue';
import { LockNotAcquiredError } from '../../lib/errors';
import type { AcquireOptions } from '../../lib/interfaces/lock-options.interface';
import { LockTestKit, countCommands } from './lock-test-kit';
import { rawLockOf, liveReservations } from './adversarial/modes-kit';
import type { RawLock } from './adversarial/modes-kit';

/** A lock document with its key as `_id`. */
type KeyedLock = RawLock & { _id: string };

// Jest's default 5 s is what several tests here take on a loaded machine (up to 5.1 s measured).
jest.setTimeout(30_000);

const kit = LockTestKit.forSuite();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until `check` holds (a few seconds at most). */
async function eventually(check: () => Promise<boolean>, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(10);
  }
}

async function serviceWithCommands() {
  const client = await kit.client({ monitorCommands: true });
  const commands = countCommands(client);
  const service = await kit.service({ client, ensureIndexes: false });
  return { service, commands };
}

async function lockCollection(): Promise<Collection<KeyedLock>> {
  const client = await kit.client();
  return client.db(kit.mongo.dbName).collection<KeyedLock>(kit.collectionName);
}

/** A reservation as a waiting process leaves it, `ageMs` old, alive for `ttlMs` more. */
function reservation(holder: string, ageMs: number, ttlMs = 10_000) {
  return {
    weight: 1000,
    since: new Date(Date.now() - ageMs),
    expiresAt: new Date(Date.now() + ttlMs),
    holder,
  };
}

describe('direct grant between processes', () => {
  it('hands the lock to the waiting process with the release; others send nothing', async () => {
    const a = await kit.service();
    const b = await serviceWithCommands();
    const c = await serviceWithCommands();
    // C reads events$ too: its stream then carries every change, and C itself must tell that
    // B's grant is not for it.
    const cEvents = c.service.events$.subscribe(() => undefined);
    await sleep(200);
    const held = await a.acquire('k', { ttlMs: 30_000 });
    const bWaits = b.service.acquire('k', { timeoutMs: 20_000 });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'k')).length === 1);
    const cWaits = c.service.acquire('k', { timeoutMs: 20_000 });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'k')).length === 2);
    await sleep(100);
    b.commands.reset();
    c.commands.reset();

    await held.release();
    const bHandle = await bWaits;
    // The grant's change event handed B the lock: B wrote nothing before its call resolved
    // (it only read its change stream).
    expect(b.commands.names.filter((name) => name !== 'getMore')).toEqual([]);
    // B holds it under the grant's placeholder token.
    const granted = await rawLockOf(kit, 'k');
    expect(granted?.owner).toMatch(new RegExp(`^grant:r[0-9a-f]+:${bHandle.fence}$`));
    // Its first renewal, sent at once and small, confirms the grant; C, behind B, was not
    // even woken.
    await eventually(async () => (await rawLockOf(kit, 'k'))?.grantedTo === null);
    expect(b.commands.names.filter((name) => name === 'findAndModify')).toHaveLength(1);
    expect(b.commands.sizes[b.commands.names.indexOf('findAndModify')]).toBeLessThan(1_000);
    await sleep(100);
    expect(c.commands.names.filter((name) => name === 'findAndModify')).toHaveLength(0);
    cEvents.unsubscribe();
    expect(bHandle.fence).toBeGreaterThan(held.fence);

    const doc = await rawLockOf(kit, 'k');
    // B holds the lock under the grant's placeholder, now confirmed: no longer a pending grant.
    expect(doc?.holder).toBe(b.service.holderId);
    expect(doc?.owner).toBe(granted?.owner);
    expect(doc?.grantee).toBeNull();
    // Full lease after the confirmation, not the short grant lease.
    expect(new Date(doc?.expiresAt).getTime() - Date.now()).toBeGreaterThan(GRANT_LEASE_MS);
    expect(bHandle.lost).toBe(false);

    await bHandle.release();
    const cHandle = await cWaits;
    expect(cHandle.fence).toBeGreaterThan(bHandle.fence);
    await cHandle.release();
    // The last release frees the key: nobody waits.
    expect(liveReservations(await rawLockOf(kit, 'k'))).toEqual([]);
    expect((await rawLockOf(kit, 'k'))?.owner).toBeNull();
  });

  /** A holds `key` while B, its commands counted from now, waits in line for it. */
  async function waitingInLine(key: string) {
    const a = await kit.service();
    const b = await serviceWithCommands();
    const held = await a.acquire(key, { ttlMs: 30_000 });
    const bWaits = b.service.acquire(key, { ttlMs: 30_000, timeoutMs: 20_000 });
    await eventually(async () => liveReservations(await rawLockOf(kit, key)).length === 1);
    // B's stream is awaiting the change (its getMore was sent before this).
    await sleep(100);
    b.commands.reset();
    return { held, b, bWaits };
  }

  it('the caller handed a grant runs before its process sends anything more', async () => {
    const { held, b, bWaits } = await waitingInLine('caller-first');
    await held.release();
    await bWaits;
    // The confirming renewal and the stream's next read wait for the event loop's next turn.
    const sentBeforeCaller = [...b.commands.names];
    expect(sentBeforeCaller).toEqual([]);
    await eventually(async () => (await rawLockOf(kit, 'caller-first'))?.grantedTo === null);
    expect(b.commands.names).toEqual(expect.arrayContaining(['findAndModify', 'getMore']));
    await (await bWaits).release();
  });

  it("the last caller waiting in a process is handed the grant: its confirmation also takes the process's place out of line, and nothing is withdrawn", async () => {
    const { held, b, bWaits } = await waitingInLine('leaves-line');
    await held.release();
    const bHandle = await bWaits;
    await eventually(async () => (await rawLockOf(kit, 'leaves-line'))?.grantedTo === null);
    expect(liveReservations(await rawLockOf(kit, 'leaves-line'))).toEqual([]);
    await sleep(200);
    const writes = b.commands.names.filter((name) => !['getMore', 'find'].includes(name));
    expect(writes).toEqual(['findAndModify']);
    // Nothing left in line: the release frees the key (no grant to itself), and, the grant
    // being confirmed, it is the only write (no withdrawal first).
    await bHandle.release();
    expect(await rawLockOf(kit, 'leaves-line')).toMatchObject({ owner: null, grantedTo: null });
    const allWrites = b.commands.names.filter((name) => !['getMore', 'find'].includes(name));
    expect(allWrites).toEqual(['findAndModify', 'findAndModify']);
  });

  it('with more callers waiting in the process, the one handed the grant keeps its place in line', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const held = await a.acquire('keeps-line', { ttlMs: 30_000 });
    const first = b.acquire('keeps-line', { ttlMs: 30_000, timeoutMs: 20_000 });
    const second = b.acquire('keeps-line', { ttlMs: 30_000, timeoutMs: 20_000 });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'keeps-line')).length === 1);
    await sleep(100);
    await held.release();
    const firstHandle = await first;
    await eventually(async () => (await rawLockOf(kit, 'keeps-line'))?.grantedTo === null);
    expect(liveReservations(await rawLockOf(kit, 'keeps-line'))).toHaveLength(1);
    await firstHandle.release();
    await (await second).release();
  });

  it('a caller that does not renew still has its handed-out grant confirmed, with its full lease', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const held = await a.acquire('no-renew', { ttlMs: 30_000 });
    const bWaits = b.acquire('no-renew', { ttlMs: 30_000, timeoutMs: 20_000, renew: false });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'no-renew')).length === 1);
    await sleep(100);
    await held.release();
    const bHandle = await bWaits;
    await eventually(async () => (await rawLockOf(kit, 'no-renew'))?.grantedTo === null);
    const doc = await rawLockOf(kit, 'no-renew');
    expect(new Date(doc?.expiresAt).getTime() - Date.now()).toBeGreaterThan(GRANT_LEASE_MS);
    expect(bHandle.lost).toBe(false);
    await bHandle.release();
    expect((await rawLockOf(kit, 'no-renew'))?.owner).toBeNull();
  });

  it('a caller that finds the key held takes its place in line at once: the small command, then the full attempt', async () => {
    const a = await kit.service();
    const held = await a.acquire('line');
    const { service: b, commands } = await serviceWithCommands();
    const waiting = b.acquire('line', { timeoutMs: 10_000 });
    const collection = await lockCollection();
    await eventually(async () => {
      const doc = await collection.findOne({ _id: 'line' });
      const waiting = (doc?.waiting ?? {}) as Record<string, { holder?: string }>;
      return Object.values(waiting).some((entry) => entry.holder === b.holderId);
    });
    const sizes = commands.sizes.filter((_, i) => commands.names[i] === 'findAndModify');
    expect(sizes).toHaveLength(2);
    expect(sizes[0]).toBeLessThan(4_000);
    expect(sizes[1]).toBeGreaterThan(4_000);
    await held.release();
    await (await waiting).release();
  });

  it('a process whose release just handed the key to another waits again with the full attempt alone', async () => {
    const a = await serviceWithCommands();
    const b = await kit.service();
    const held = await a.service.acquire('again', { ttlMs: 30_000 });
    const bWaits = b.acquire('again', { ttlMs: 30_000, timeoutMs: 10_000 });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'again')).length === 1);
    await held.release();
    a.commands.reset();
    const aWaits = a.service.acquire('again', { ttlMs: 30_000, timeoutMs: 10_000 });
    await eventually(async () => {
      const waiting = ((await rawLockOf(kit, 'again'))?.waiting ?? {}) as Record<string, RawLock>;
      return Object.values(waiting).some((place) => place.holder === a.service.holderId);
    });
    const sizes = a.commands.sizes.filter((_, i) => a.commands.names[i] === 'findAndModify');
    expect(sizes).toHaveLength(1);
    expect(sizes[0]).toBeGreaterThan(4_000);
    await (await bWaits).release();
    await (await aWaits).release();
  });

  it('a polling caller that finds a plain key held sends nothing more until its next poll', async () => {
    const a = await kit.service();
    const held = await a.acquire('polled');
    const client = await kit.client({ monitorCommands: true });
    const commands = countCommands(client);
    const b = await kit.service({
      client,
      ensureIndexes: false,
      changeStreams: 'off',
      pollIntervalMs: 5_000,
    });
    await expect(b.acquire('polled', { timeoutMs: 500 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    // The full attempt of a poller takes no place in line on a plain lock: it is not sent.
    expect(commands.names.filter((name) => name === 'findAndModify')).toHaveLength(1);
    await held.release();
  });

  it('a call that fails after a grant was handed to it gives that key back to the line at once', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const c = await kit.service();
    const d = await kit.service();
    const first = await a.acquire('gb:1', { ttlMs: 30_000 });
    const second = await c.acquire('gb:2', { ttlMs: 30_000 });
    const bFails = b
      .acquire(['gb:1', 'gb:2'], { ttlMs: 30_000, timeoutMs: 1_500 })
      .catch((error: unknown) => error);
    await eventually(async () => liveReservations(await rawLockOf(kit, 'gb:1')).length === 1);
    const dWaits = d.acquire('gb:1', { ttlMs: 30_000, timeoutMs: 20_000 });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'gb:1')).length === 2);
    await first.release(); // handed to b, which then waits for gb:2 in vain
    await eventually(async () => (await rawLockOf(kit, 'gb:1'))?.holder === b.holderId);
    expect(await bFails).toBeInstanceOf(LockNotAcquiredError);
    const failedAt = performance.now();
    const dHandle = await dWaits;
    // Not given back, gb:1 stays b's until its grant lease ends (GRANT_LEASE_MS, 5 s).
    expect(performance.now() - failedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    await dHandle.release();
    await second.release();
  });

  it('grants in the order processes started waiting; each passes the lock among its own callers', async () => {
    const a = await kit.service();
    const services = [await kit.service(), await kit.service(), await kit.service()];
    const held = await a.acquire('order');
    const order: string[] = [];
    const waits: Promise<void>[] = [];
    for (const [index, service] of services.entries()) {
      for (let call = 0; call < 2; call += 1) {
        waits.push(
          service.withLock('order', async () => void order.push(`s${index}`), {
            timeoutMs: 30_000,
          }),
        );
      }
      await eventually(
        async () => liveReservations(await rawLockOf(kit, 'order')).length === index + 1,
      );
    }
    await held.release();
    await Promise.all(waits);
    // The processes in the order they reserved; within each, its callers one after another
    // (local transfers).
    expect(order).toEqual(['s0', 's0', 's1', 's1', 's2', 's2']);
  });

  it('events$ reports a hand-off as the release and then the acquisition', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const observer = await kit.service();
    const events = firstValueFrom(
      observer.events$.pipe(
        filter((event) => event.key === 'ev'),
        take(3),
        toArray(),
      ),
    );
    await sleep(200); // the observer's stream runs
    const held = await a.acquire('ev');
    const waiting = b.acquire('ev', { timeoutMs: 10_000 });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'ev')).length === 1);
    await held.release();
    const handle = await waiting;
    expect((await events).map(({ type, holderId, fence }) => ({ type, holderId, fence }))).toEqual([
      { type: 'acquired', holderId: a.holderId, fence: held.fence },
      { type: 'released', holderId: a.holderId, fence: held.fence },
      { type: 'acquired', holderId: b.holderId, fence: handle.fence },
    ]);
    await handle.release();
  });

  it('a grant to a process that died costs the others at most its short grant lease and the reservation', async () => {
    const a = await kit.service();
    const c = await kit.service();
    const held = await a.acquire('dead', { ttlMs: 60_000 });
    const collection = await lockCollection();
    // A process that reserved its place first, then died: its reservation runs 3 s more.
    await collection.updateOne(
      { _id: 'dead' },
      { $set: { 'waiting.rghost': reservation('ghost', 60_000, 3_000) } },
    );
    const started = Date.now();
    const waiting = c.acquire('dead', { timeoutMs: 30_000 });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'dead')).length === 2);
    await held.release();
    const granted = await rawLockOf(kit, 'dead');
    expect(granted).toMatchObject({ grantedTo: 'rghost', grantee: 'ghost', holder: 'ghost' });
    const handle = await waiting;
    // Not the holder's 60 s lease: the grant's, at most.
    expect(Date.now() - started).toBeLessThan(GRANT_LEASE_MS + 5_000);
    expect(handle.fence).toBeGreaterThan(BigInt((granted?.fence as Long).toString()));
    await handle.release();
  }, 30_000);
});

describe('local transfer between callers of one process', () => {
  /**
   * A caller of one service holds `key` while a second waits; the first releases. Returns the
   * second's handle and the lock commands sent from the release on.
   */
  async function handOff(key: string, firstOptions: AcquireOptions, secondOptions: AcquireOptions) {
    const a = await serviceWithCommands();
    const first = await a.service.acquire(key, firstOptions);
    const second = a.service.acquire(key, { timeoutMs: 10_000, ...secondOptions });
    await eventually(async () => liveReservations(await rawLockOf(kit, key)).length === 1);
    await sleep(100);
    const before = await rawLockOf(kit, key);
    a.commands.reset();
    await first.release();
    const handle = await second;
    const writes = a.commands.names.filter((name) => name === 'findAndModify').length;
    return { service: a.service, first, handle, before, writes };
  }

  it('within the lease, hands the lock to the next caller here with no command: next fence, same lease', async () => {
    const { first, handle, before, writes } = await handOff(
      't',
      { ttlMs: 30_000 },
      { ttlMs: 20_000 },
    );
    expect(writes).toBe(0);
    expect(handle.fence).toBe(first.fence + 1n);
    // The document is as the first lease left it: its owner token, fence and lease.
    expect(await rawLockOf(kit, 't')).toMatchObject({
      owner: before?.owner,
      fence: before?.fence,
      expiresAt: before?.expiresAt,
    });
    // The new holder renews and releases it; the release remembers its own fence.
    await handle.extend();
    const renewed = await rawLockOf(kit, 't');
    expect(new Date(renewed?.expiresAt).getTime()).toBeGreaterThan(Date.now() + 15_000);
    await handle.release();
    const released = await rawLockOf(kit, 't');
    expect(released?.owner).toBeNull();
    expect(String(released?.releasedFence)).toBe(String(handle.fence));
    const ring = (released?.releasedOwners ?? []) as { fence: Long }[];
    expect(ring.map((entry) => String(entry.fence))).toContain(String(handle.fence));
  });

  it('passes the lock by a write to a caller asking for a longer lease than the holder', async () => {
    const { service, first, handle, writes } = await handOff(
      't-long',
      { ttlMs: 30_000 },
      { ttlMs: 80_000 },
    );
    expect(writes).toBe(1);
    // A new lease, with a block of fences of its own.
    expect(handle.fence).toBe(first.fence + BigInt(FENCES_PER_LEASE));
    const doc = await rawLockOf(kit, 't-long');
    expect(BigInt(String(doc?.fence))).toBe(handle.fence);
    expect(doc?.holder).toBe(service.holderId);
    const remainingMs = new Date(doc?.expiresAt).getTime() - Date.now();
    expect(remainingMs).toBeGreaterThan(60_000); // the successor's own ttl, not the first's
    await handle.release();
  });

  it('passes the lock by a write to a caller of another scope', async () => {
    const { service, handle, writes } = await handOff(
      't-scope',
      { scope: 'one' },
      { scope: 'two' },
    );
    expect(writes).toBe(1);
    expect(await rawLockOf(kit, 't-scope')).toMatchObject({ scope: 'two' });
    // Releasing the first scope's locks leaves the second's alone.
    expect(await service.releaseScope('one')).toBe(0);
    await handle.release();
  });

  it('a run of hand-offs within one lease stays below the fence of the next holder elsewhere', async () => {
    // A fence far above the clock, so that only the reserved block keeps the next grant's
    // fence above those handed on here.
    const collection = await lockCollection();
    await collection.insertOne({
      _id: 'run',
      owner: null,
      fence: Long.fromString('9000000000000000'),
    });
    const a = await kit.service();
    const b = await kit.service();
    const holds: { who: 'a' | 'b'; fence: bigint }[] = [];
    const first = await a.acquire('run');
    const local = Array.from({ length: MAX_LOCAL_TRANSFERS + 2 }, () =>
      a.withLock('run', async (lock) => void holds.push({ who: 'a', fence: lock.fence }), {
        timeoutMs: 30_000,
      }),
    );
    await eventually(async () => liveReservations(await rawLockOf(kit, 'run')).length === 1);
    const remote = b.withLock(
      'run',
      async (lock) => void holds.push({ who: 'b', fence: lock.fence }),
      {
        timeoutMs: 30_000,
      },
    );
    await eventually(async () => liveReservations(await rawLockOf(kit, 'run')).length === 2);
    await first.release();
    await Promise.all([...local, remote]);
    // Hand-offs within the first lease take its block's next fences; B's grant starts past it.
    const turn = holds.findIndex((hold) => hold.who === 'b');
    expect(turn).toBeGreaterThan(0);
    const run = holds.slice(0, turn).map((hold) => hold.fence);
    expect(run).toEqual(run.map((_, index) => first.fence + BigInt(index + 1)));
    expect(holds[turn].fence).toBeGreaterThan(lastReservedFence(first.fence));
    for (const later of holds.slice(turn + 1))
      expect(later.fence).toBeGreaterThan(holds[turn].fence);
  });

  it('a call that fails after being handed a key gives that key back', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const first = await a.acquire('a-given');
    const blocker = await b.acquire('z-blocked');
    // This call gets `a-given` from `first` without a write, then waits for `z-blocked` in vain.
    const failing = a.acquire(['a-given', 'z-blocked'], { timeoutMs: 1_500 });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'a-given')).length === 1);
    await first.release();
    await expect(failing).rejects.toThrow(LockNotAcquiredError);
    // It held `a-given` by the first caller's token: that is what its give-back must use.
    await eventually(async () => (await rawLockOf(kit, 'a-given'))?.owner === null);
    const handle = await b.acquire('a-given', { timeoutMs: 0 });
    await handle.release();
    await blocker.release();
  }, 20_000);

  /**
   * Callers of A waiting behind A's holder, then B waiting in another process: the first
   * release starts a local run, and the run ends (the lock going to B) after `sectionMs`-long
   * sections of A, within MAX_LOCAL_TRANSFERS transfers and after LOCAL_RUN_MS.
   */
  async function turnOfB(
    localCallers: number,
    sectionMs: number,
  ): Promise<{ turn: number; runMs: number }> {
    const a = await kit.service();
    const b = await kit.service();
    const order: string[] = [];
    const at: number[] = [];
    const first = await a.acquire('turns');
    const local = Array.from({ length: localCallers }, (_, index) =>
      a.withLock(
        'turns',
        async () => {
          order.push(`a${index}`);
          at.push(performance.now());
          await sleep(sectionMs);
        },
        { timeoutMs: 30_000 },
      ),
    );
    await eventually(async () => liveReservations(await rawLockOf(kit, 'turns')).length === 1);
    const remote = b.withLock(
      'turns',
      async () => {
        order.push('b');
        at.push(performance.now());
      },
      { timeoutMs: 30_000 },
    );
    await eventually(async () => liveReservations(await rawLockOf(kit, 'turns')).length === 2);
    await first.release();
    await Promise.all([...local, remote]);
    const turn = order.indexOf('b');
    // From the run's first transfer (the first local section) to B's turn.
    return { turn, runMs: at[turn] - at[0] };
  }

  it('a local run of quick sections ends after MAX_LOCAL_TRANSFERS transfers', async () => {
    const { turn, runMs } = await turnOfB(MAX_LOCAL_TRANSFERS + 2, 0);
    // Quick sections: the count ends the run, unless a slow machine made it outlast LOCAL_RUN_MS.
    expect(turn).toBeGreaterThan(0);
    if (runMs < LOCAL_RUN_MS) expect(turn).toBe(MAX_LOCAL_TRANSFERS);
    else expect(turn).toBeLessThanOrEqual(MAX_LOCAL_TRANSFERS);
  });

  it('a local run ends once it has lasted LOCAL_RUN_MS from its first transfer', async () => {
    // Each section is shorter than LOCAL_RUN_MS, two are longer: the run that starts at the
    // first release ends at the second release after it (sooner, if sections run late).
    const { turn } = await turnOfB(4, LOCAL_RUN_MS * 0.6);
    expect(turn).toBeGreaterThan(0);
    expect(turn).toBeLessThanOrEqual(2);
  });

  it('two busy processes take turns: neither keeps the lock for long runs', async () => {
    const services = [await kit.service(), await kit.service()];
    const holders: number[] = [];
    // A wait is counted in the holds that came before it (not in ms: on a loaded machine
    // each hold takes longer, not more of them come first).
    let longestWaitHolds = 0;
    const worker = async (index: number) => {
      while (holders.length < 150) {
        const asked = holders.length;
        await services[index].withLock(
          'busy',
          async () => {
            longestWaitHolds = Math.max(longestWaitHolds, holders.length - asked);
            holders.push(index);
            await sleep(5 + Math.random() * 20);
          },
          { timeoutMs: 20_000 },
        );
      }
    };
    await Promise.all([0, 0, 0, 1, 1, 1].map(worker));
    let run = 1;
    let longestRun = 1;
    for (let i = 1; i < holders.length; i += 1) {
      run = holders[i] === holders[i - 1] ? run + 1 : 1;
      longestRun = Math.max(longestRun, run);
    }
    // A turn is one grant and a local run; allow a turn and a bit more.
    expect(longestRun).toBeLessThanOrEqual(MAX_LOCAL_TRANSFERS + 3);
    const share = holders.filter((index) => index === 0).length / holders.length;
    expect(share).toBeGreaterThan(0.25);
    expect(share).toBeLessThan(0.75);
    // Ahead of a waiter: its two local peers and the other process's turn, twice over at most.
    // A waiter passed over for the whole run sees most of the run's holds go by.
    expect(longestWaitHolds).toBeLessThanOrEqual(2 * (2 + MAX_LOCAL_TRANSFERS + 3));
  }, 60_000);

  it('a caller that left while the release was on its way gives the lock back', async () => {
    const a = await kit.service();
    const other = await kit.service();
    const first = await a.acquire('left');
    const controller = new AbortController();
    const leaving = a.acquire('left', { timeoutMs: 10_000, signal: controller.signal });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'left')).length === 1);
    const releasing = first.release();
    controller.abort(new Error('gone'));
    await expect(leaving).rejects.toThrow('gone');
    await releasing;
    // Whatever the transfer did, nobody holds the key for long: another process gets it.
    const handle = await other.acquire('left', { timeoutMs: 5_000 });
    await handle.release();
  });

  it('a release that ends the local run grants to this process, whose next caller takes it with one small command', async () => {
    const a = await serviceWithCommands();
    const first = await a.service.acquire('own-grant', { ttlMs: 30_000 });
    const second = a.service.acquire('own-grant', { ttlMs: 30_000, timeoutMs: 10_000 });
    const third = a.service.acquire('own-grant', { ttlMs: 30_000, timeoutMs: 10_000 });
    await eventually(async () => liveReservations(await rawLockOf(kit, 'own-grant')).length === 1);
    await eventually(async () => a.service.diagnostics.waiters === 2);
    await sleep(100); // both parked, no attempt on its way
    await first.release(); // to `second`, within the lease: the local run begins
    const secondHandle = await second;
    await sleep(LOCAL_RUN_MS + 20);
    a.commands.reset();

    // The run has lasted too long: the release goes by the line, where this process is first.
    await secondHandle.release();
    const thirdHandle = await third;
    const writes = a.commands.names.flatMap((name, index) =>
      name === 'findAndModify' ? [a.commands.sizes[index]] : [],
    );
    // The release, then the confirming command (not the full attempt of about 9 KB).
    expect(writes).toHaveLength(2);
    expect(writes[1]).toBeLessThan(2_000);
    expect(thirdHandle.fence).toBeGreaterThan(secondHandle.fence);
    const doc = await rawLockOf(kit, 'own-grant');
    expect(doc?.owner).not.toMatch(/^grant:/);
    await thirdHandle.release();
  });
});

describe('direct grant in the store (one command each)', () => {
  const key = 'store';
  const ttlMs = 30_000;

  /** The key's document as given; `attempt` sends one attempt on it as process `holder`. */
  async function setUp(doc: RawLock, client?: MongoClient) {
    client ??= await kit.client();
    const collection = client.db(kit.mongo.dbName).collection<KeyedLock>(kit.collectionName);
    await collection.insertOne({ ...doc, _id: key });
    const locks = collection as unknown as LockCollection;
    const attempt = (
      holder: string,
      owner: string,
      reservation: string,
      reservationUse: ReservationUse = { keep: false, grantable: true },
    ) => attemptAcquire(locks, client, { key, owner, holder, ttlMs, reservation, reservationUse });
    return { collection, lockCollection: locks, attempt };
  }

  // Fences are never below the server's clock in ms: start above it to see each step. Each new
  // lease reserves FENCES_PER_LEASE of them.
  const base = 2 * Date.now();

  /** `doc` shows a pending grant to process `holder` (its reservation `r<holder>`) at `fence`. */
  function expectGranted(doc: RawLock | null, holder: string, fence: number) {
    const grantFence = BigInt(base + fence);
    expect(doc).toMatchObject({
      owner: grantToken(`r${holder}`, grantFence),
      holder,
      grantee: holder,
      grantedTo: `r${holder}`,
    });
    expect(Number(doc?.fence)).toBe(base + fence);
  }

  function grantedState(fence: number) {
    return {
      owner: grantToken('rme', BigInt(base + fence)),
      holder: 'me',
      fence: Long.fromNumber(base + fence),
      acquiredAt: new Date(),
      expiresAt: new Date(Date.now() + GRANT_LEASE_MS),
      grantedTo: 'rme',
      grantee: 'me',
      gcAt: null,
      waiting: { rme: reservation('me', 10), rother: reservation('other', 5) },
    };
  }

  it('the grantee confirms with its own token and full lease; the fence stays', async () => {
    const { collection, attempt } = await setUp(grantedState(41));
    const outcome = await attempt('me', 'token-1', 'rme');
    expect(outcome).toMatchObject({ won: true, owner: 'token-1', fence: BigInt(base + 41) });
    expect(outcome.remainingMs).toBeGreaterThan(GRANT_LEASE_MS);
    const doc = await collection.findOne({ _id: key });
    expect(doc).toMatchObject({ owner: 'token-1', grantedTo: null, grantee: null });
    expect(Object.keys(doc?.waiting ?? {})).toEqual(['rother']);
  });

  it('a confirmation with more waiting here keeps the reservation, at the back of the line', async () => {
    const { collection, attempt } = await setUp(grantedState(7));
    const outcome = await attempt('me', 'token-2', 'rme', { keep: true, grantable: true });
    expect(outcome).toMatchObject({ won: true, owner: 'token-2' });
    expect(outcome.reservedMs).toBeGreaterThan(0);
    const doc = await collection.findOne({ _id: key });
    const waiting = doc?.waiting as Record<string, { since: Date }>;
    expect(Object.keys(waiting).sort()).toEqual(['rme', 'rother']);
    expect(waiting.rme.since.getTime()).toBeGreaterThan(waiting.rother.since.getTime());
  });

  it('another process cannot confirm a grant that is not its own', async () => {
    const { attempt } = await setUp(grantedState(3));
    const outcome = await attempt('other', 'token-3', 'rother');
    expect(outcome.won).toBe(false);
  });

  it('a stale grantedTo never lets a process take a lock someone else holds', async () => {
    // The grant ran out and someone took the key afresh, leaving the grant's marks behind.
    const { collection, attempt } = await setUp({
      ...grantedState(5),
      owner: 'someone',
      holder: 'other',
      expiresAt: new Date(Date.now() + 30_000),
    });
    const outcome = await attempt('me', 'token-6', 'rme');
    expect(outcome.won).toBe(false);
    expect(await collection.findOne({ _id: key })).toMatchObject({ owner: 'someone' });
  });

  it('a polling waiter is never granted the lock: its reservation does not name its process', async () => {
    const { collection, attempt } = await setUp({
      owner: 'someone',
      holder: 'other',
      fence: Long.fromNumber(base),
      expiresAt: new Date(Date.now() + 30_000),
      gcAt: null,
      // Someone is in line already: a polling waiter takes its place too (fairness).
      waiting: { rother: reservation('other', 50) },
    });
    const attemptAs = (grantable: boolean) =>
      attempt('me', 'token-7', 'rme', { keep: false, grantable });
    expect((await attemptAs(false)).won).toBe(false);
    let doc = await collection.findOne({ _id: key });
    expect(doc?.waiting?.rme).toBeDefined();
    expect(doc?.waiting?.rme.holder).toBeUndefined();
    // Once its stream runs, its next attempt names it.
    expect((await attemptAs(true)).won).toBe(false);
    doc = await collection.findOne({ _id: key });
    expect(doc?.waiting?.rme.holder).toBe('me');
  });

  /** Our grant ran out; it had moved us to the back, so the other process is first in line. */
  function lapsedGrant(fence: number) {
    return {
      ...grantedState(fence),
      expiresAt: new Date(Date.now() - 1),
      waiting: { rother: reservation('other', 50), rme: reservation('me', 10) },
    };
  }

  it('a grant that ran out is not confirmed: the head of the line gets the lock', async () => {
    const { collection, attempt } = await setUp(lapsedGrant(3));
    const outcome = await attempt('me', 'token-4', 'rme');
    expect(outcome.won).toBe(false);
    expectGranted(await collection.findOne({ _id: key }), 'other', 3 + FENCES_PER_LEASE);
  });

  it('a process whose grant ran out leaves the line: the next waiter gets the lock', async () => {
    const state = grantedState(3);
    const { collection, attempt } = await setUp({
      ...state,
      expiresAt: new Date(Date.now() - 1),
      // The dead grantee is the only one in line besides the late waiter.
      waiting: { rme: reservation('me', 10) },
    });
    const outcome = await attempt('late', 'token-8', 'rlate');
    // Not handed to the lapsed grantee again: the late waiter, now first in line, takes it.
    expect(outcome).toMatchObject({ won: true, owner: 'token-8' });
    const doc = await collection.findOne({ _id: key });
    expect(Object.keys(doc?.waiting ?? {})).toEqual([]);
  });

  it('a grant that ran out, with nobody else in line, is taken afresh with a new fence', async () => {
    const state = grantedState(3);
    const { attempt } = await setUp({
      ...state,
      expiresAt: new Date(Date.now() - 1),
      waiting: { rme: reservation('me', 10) },
    });
    const outcome = await attempt('me', 'token-4', 'rme');
    expect(outcome).toMatchObject({ won: true, fence: BigInt(base + 3 + FENCES_PER_LEASE) });
  });

  it('an attempt that finds the lease ended hands the lock to the oldest waiting process', async () => {
    const { collection, attempt } = await setUp({
      owner: 'dead-holder',
      holder: 'dead',
      fence: Long.fromNumber(base + 9),
      expiresAt: new Date(Date.now() - 1),
      gcAt: null,
      waiting: { rhead: reservation('head', 100) },
    });
    const outcome = await attempt('late', 'token-5', 'rlate');
    expect(outcome.won).toBe(false);
    const doc = await collection.findOne({ _id: key });
    expectGranted(doc, 'head', 9 + FENCES_PER_LEASE);
    // The late waiter took its place behind, the grantee went to the back.
    expect(Object.keys(doc?.waiting ?? {}).sort()).toEqual(['rhead', 'rlate']);
  });

  /** `holder` holds the key by `owner`'s live lease, at `fence`. */
  function heldState(owner: string, holder: string, fence: number) {
    return {
      owner,
      holder,
      fence: Long.fromNumber(base + fence),
      expiresAt: new Date(Date.now() + 30_000),
      gcAt: null,
    };
  }

  /** The pipeline's working fields (`_w`, the line it computed, and the rest) are gone. */
  function expectOnlyLockFields(doc: KeyedLock | null) {
    expect(Object.keys(doc ?? {}).filter((field) => field.startsWith('_'))).toEqual(['_id']);
  }

  it('a release that grants says to whom, with a bound of the fence: past the released block, not past the grant', async () => {
    const { collection, lockCollection: locks } = await setUp({
      ...heldState('token-5', 'me', 5),
      waiting: { rother: reservation('other', 5) },
    });
    const result = await releaseLease(locks, { key, owner: 'token-5', idleRetentionMs: 60_000 });
    const doc = await collection.findOne({ _id: key });
    expect(doc?.grantedTo).toBe('rother');
    expect(result).toMatchObject({ outcome: 'released', grantedTo: 'other' });
    expect(result.grantFence).toBe(lastReservedFence(BigInt(base + 5)) + 1n);
    expect(result.grantFence).toBeLessThanOrEqual(BigInt(Number(doc?.fence)));
    expectOnlyLockFields(doc);
  });

  it('a retried release never passes on a lock someone else holds now', async () => {
    const { collection, lockCollection: locks } = await setUp({
      ...heldState('other-token', 'other', 7),
      // Our earlier release of 'token-9' succeeded; its reply was lost.
      releasedOwners: [{ owner: 'token-9', until: new Date(Date.now() + 30_000) }],
    });
    const result = await releaseLease(locks, {
      key,
      owner: 'token-9',
      idleRetentionMs: 60_000,
      successor: { owner: 'token-10', holder: 'me', ttlMs, scope: null },
    });
    expect(result).toEqual({ outcome: 'released' });
    const doc = await collection.findOne({ _id: key });
    expect(doc).toMatchObject({ owner: 'other-token' });
    expectOnlyLockFields(doc);
  });

  it('a process that leaves with an unconfirmed grant passes it on', async () => {
    const { collection, lockCollection: locks } = await setUp(grantedState(20));
    await withdrawReservation(locks, key, 'rme', 60_000);
    const doc = await collection.findOne({ _id: key });
    expectGranted(doc, 'other', 20 + FENCES_PER_LEASE);
    expect(Object.keys(doc?.waiting ?? {})).toEqual(['rother']);
  });

  it('the last waiting process leaving with an unconfirmed grant frees the key', async () => {
    const state = grantedState(20);
    const { collection, lockCollection: locks } = await setUp({
      ...state,
      waiting: { rme: state.waiting.rme },
    });
    await withdrawReservation(locks, key, 'rme', 60_000);
    const doc = await collection.findOne({ _id: key });
    expect(doc).toMatchObject({ owner: null, grantedTo: null, waiting: {} });
    expect(doc?.gcAt).toBeInstanceOf(Date);
  });

  describe('a grant handed out on its change event (held under its placeholder)', () => {
    const token = () => grantToken('rme', BigInt(base + 5));

    it("a renewal under the grant's token confirms it: the marks go, the lease is the caller's", async () => {
      const { collection, lockCollection: locks } = await setUp(grantedState(5));
      const renewal = await renewLease(locks, { key, owner: token(), ttlMs });
      expect(renewal.renewed).toBe(true);
      const doc = await collection.findOne({ _id: key });
      expect(doc).toMatchObject({ owner: token(), holder: 'me', grantedTo: null, grantee: null });
      expect(Number(doc?.fence)).toBe(base + 5);
      expect(doc!.expiresAt.getTime() - Date.now()).toBeGreaterThan(GRANT_LEASE_MS);
    });

    it("with leaveLine, the confirming renewal also drops the grant's place in line; a later renewal leaves a place written since", async () => {
      const { collection, lockCollection: locks } = await setUp(grantedState(5));
      const places = async () =>
        Object.keys((await collection.findOne({ _id: key }))?.waiting ?? {});
      expect(
        (await renewLease(locks, { key, owner: token(), ttlMs, leaveLine: true })).renewed,
      ).toBe(true);
      expect(await places()).toEqual(['rother']);
      await collection.updateOne({ _id: key }, { $set: { 'waiting.rme': reservation('me', 0) } });
      await renewLease(locks, { key, owner: token(), ttlMs, leaveLine: true });
      expect((await places()).sort()).toEqual(['rme', 'rother']);
    });

    it('without leaveLine, the confirming renewal keeps the place', async () => {
      const { collection, lockCollection: locks } = await setUp(grantedState(5));
      await renewLease(locks, { key, owner: token(), ttlMs });
      const doc = await collection.findOne({ _id: key });
      expect(doc).toMatchObject({ grantedTo: null });
      expect(Object.keys(doc?.waiting ?? {}).sort()).toEqual(['rme', 'rother']);
    });

    it('our later attempts, in either form, and our withdrawal leave it alone', async () => {
      const { collection, lockCollection: locks, attempt } = await setUp(grantedState(5));
      for (const confirmsGrant of [false, true]) {
        const outcome = await attempt('me', `token-${confirmsGrant}`, 'rme', {
          keep: true,
          grantable: true,
          confirmsGrant,
          exceptGrant: token(),
        });
        expect(outcome.won).toBe(false);
        expect((await collection.findOne({ _id: key }))?.owner).toBe(token());
      }
      await withdrawReservation(locks, key, 'rme', 60_000, token());
      const doc = await collection.findOne({ _id: key });
      expect(doc).toMatchObject({ owner: token(), grantedTo: 'rme' });
      expect(Object.keys(doc?.waiting ?? {})).toEqual(['rother']);
    });

    /** A monitored client, and the BSON size of each update it sends. */
    async function updateSizes() {
      const client = await kit.client({ monitorCommands: true });
      const sizes: number[] = [];
      client.on('commandStarted', (event) => {
        if (event.commandName === 'update') sizes.push(BSON.calculateObjectSize(event.command));
      });
      return { client, sizes };
    }

    it('our withdrawal while we hold under it is one small command: only our place goes, nothing is freed', async () => {
      const { client, sizes } = await updateSizes();
      const { collection, lockCollection: locks } = await setUp(
        { ...grantedState(5), frees: 3 },
        client,
      );
      await withdrawReservation(locks, key, 'rme', 60_000, token());
      const doc = await collection.findOne({ _id: key });
      expect(doc).toMatchObject({ owner: token(), grantedTo: 'rme', frees: 3 });
      expect(Object.keys(doc?.waiting ?? {})).toEqual(['rother']);
      expect(sizes).toHaveLength(1);
      expect(sizes[0]).toBeLessThan(1_000);
    });

    it('once the key has moved on from the grant handed out, the full withdrawal decides', async () => {
      const { client, sizes } = await updateSizes();
      const { collection, lockCollection: locks } = await setUp(
        {
          ...grantedState(5),
          owner: 'later-owner',
          holder: 'other',
          grantedTo: null,
          grantee: null,
          expiresAt: new Date(Date.now() + ttlMs),
        },
        client,
      );
      await withdrawReservation(locks, key, 'rme', 60_000, token());
      const doc = await collection.findOne({ _id: key });
      expect(doc).toMatchObject({ owner: 'later-owner' });
      expect(Object.keys(doc?.waiting ?? {})).toEqual(['rother']);
      expect(sizes).toHaveLength(2);
      expect(sizes[1]).toBeGreaterThan(1_000);
    });

    it('a later grant to the same reservation is not the one handed out: it is taken', async () => {
      const { attempt } = await setUp(grantedState(5 + FENCES_PER_LEASE));
      const outcome = await attempt('me', 'token-2', 'rme', {
        keep: false,
        grantable: true,
        confirmsGrant: true,
        exceptGrant: token(),
      });
      expect(outcome).toMatchObject({ won: true, owner: 'token-2' });
    });
  });

  /** A monitored client, and the BSON size of each findAndModify it sends. */
  async function sizedClient() {
    const client = await kit.client({ monitorCommands: true });
    const sizes: number[] = [];
    client.on('commandStarted', (event) => {
      if (event.commandName === 'findAndModify')
        sizes.push(BSON.calculateObjectSize(event.command));
    });
    return { client, sizes };
  }

  describe("a waiting caller's first attempt, with nothing known of the key (plainFirst)", () => {
    /** As `setUp`, attempting plain first; records each command's size. */
    async function setUpFirst(doc: RawLock) {
      const { client, sizes } = await sizedClient();
      const { collection, attempt } = await setUp(doc, client);
      const first = (holder: string, owner: string, reservation: string) =>
        attempt(holder, owner, reservation, { keep: false, grantable: true, plainFirst: true });
      return { collection, first, sizes };
    }

    it('takes a free plain key with the small command alone, and writes no place in line', async () => {
      const { collection, first, sizes } = await setUpFirst({ fence: Long.fromNumber(base) });
      const outcome = await first('me', 'token-1', 'rme');
      expect(outcome).toMatchObject({ won: true, owner: 'token-1' });
      expect(outcome.reservedMs).toBeUndefined();
      expect(await collection.findOne({ _id: key })).toMatchObject({ owner: 'token-1' });
      expect((await collection.findOne({ _id: key }))?.waiting).toBeUndefined();
      expect(sizes).toHaveLength(1);
      expect(sizes[0]).toBeLessThan(4_000);
    });

    it('on a held plain key, says so and takes no place in line: the queue sends the full attempt', async () => {
      const { collection, first, sizes } = await setUpFirst(heldState('someone', 'other', 3));
      const outcome = await first('me', 'token-2', 'rme');
      expect(outcome).toMatchObject({ won: false, plainOnly: true, holderId: 'other' });
      expect(outcome.reservedMs).toBeUndefined();
      expect((await collection.findOne({ _id: key }))?.waiting).toBeUndefined();
      expect(sizes).toHaveLength(1);
    });

    it('on a key with a line, the full attempt follows in the same call and takes our place', async () => {
      const { collection, first, sizes } = await setUpFirst({
        ...heldState('someone', 'other', 3),
        waiting: { rother: reservation('other', 50) },
      });
      const outcome = await first('me', 'token-4', 'rme');
      expect(outcome.won).toBe(false);
      expect(outcome.reservedMs).toBeGreaterThan(0);
      const doc = await collection.findOne({ _id: key });
      expect(liveReservations(doc ?? undefined).sort()).toEqual(['rme', 'rother']);
      expect(sizes).toHaveLength(2);
    });

    it('never takes a free key another process waits for: the full attempt grants it to the head', async () => {
      const { collection, first } = await setUpFirst({
        fence: Long.fromNumber(base + 3),
        waiting: { rother: reservation('other', 50) },
      });
      const outcome = await first('me', 'token-3', 'rme');
      expect(outcome.won).toBe(false);
      expectGranted(await collection.findOne({ _id: key }), 'other', 3 + FENCES_PER_LEASE);
    });
  });

  describe('a heard grant is taken by one small command', () => {
    /** As `setUp`, attempting as a process that heard of its grant; records each command's size. */
    async function setUpHeard(doc: RawLock) {
      const { client, sizes } = await sizedClient();
      const { collection, lockCollection: locks } = await setUp(doc, client);
      const attempt = (
        holder: string,
        owner: string,
        reservation: string,
        keep = false,
        scope?: string,
      ) =>
        attemptAcquire(locks, client, {
          key,
          owner,
          holder,
          ttlMs,
          reservation,
          reservationUse: { keep, grantable: true, confirmsGrant: true },
          ...(scope === undefined ? {} : { target: { scope } }),
        });
      return { collection, attempt, sizes };
    }

    it('our token, full lease and scope in place of the placeholder; the fence stays', async () => {
      const { collection, attempt, sizes } = await setUpHeard(grantedState(41));
      const outcome = await attempt('me', 'token-1', 'rme', false, 'scope-1');
      expect(outcome).toMatchObject({ won: true, owner: 'token-1', fence: BigInt(base + 41) });
      expect(outcome.remainingMs).toBeGreaterThan(GRANT_LEASE_MS);
      expect(outcome.reservedMs).toBe(0);
      const doc = await collection.findOne({ _id: key });
      expect(doc).toMatchObject({ owner: 'token-1', holder: 'me', scope: 'scope-1' });
      expect(doc).toMatchObject({ grantedTo: null, grantee: null });
      expect(Object.keys(doc?.waiting ?? {})).toEqual(['rother']);
      // One command, a fraction of the full attempt's.
      expect(sizes).toHaveLength(1);
      expect(sizes[0]).toBeLessThan(2_000);
    });

    it('with more waiting here, our place stays, at the back of the line', async () => {
      const { collection, attempt, sizes } = await setUpHeard(grantedState(7));
      const outcome = await attempt('me', 'token-2', 'rme', true);
      expect(outcome).toMatchObject({ won: true, owner: 'token-2' });
      expect(outcome.reservedMs).toBeGreaterThan(0);
      const waiting = (await collection.findOne({ _id: key }))?.waiting as Record<
        string,
        { since: Date; holder?: string }
      >;
      expect(Object.keys(waiting).sort()).toEqual(['rme', 'rother']);
      expect(waiting.rme.since.getTime()).toBeGreaterThan(waiting.rother.since.getTime());
      expect(waiting.rme.holder).toBe('me');
      expect(sizes).toHaveLength(1);
    });

    it('a grant that is not ours is left alone, and the full attempt decides', async () => {
      const { collection, attempt, sizes } = await setUpHeard(grantedState(3));
      const outcome = await attempt('other', 'token-3', 'rother');
      expect(outcome.won).toBe(false);
      expect(await collection.findOne({ _id: key })).toMatchObject({
        owner: grantToken('rme', BigInt(base + 3)),
      });
      expect(sizes).toHaveLength(2);
    });

    it('a grant that ran out is not taken: the full attempt hands it to the head', async () => {
      const { collection, attempt } = await setUpHeard(lapsedGrant(3));
      const outcome = await attempt('me', 'token-4', 'rme');
      expect(outcome.won).toBe(false);
      expectGranted(await collection.findOne({ _id: key }), 'other', 3 + FENCES_PER_LEASE);
    });

    it('marks of an old grant never let a process take a lock someone else holds', async () => {
      const { collection, attempt } = await setUpHeard({
        ...grantedState(5),
        owner: 'someone',
        holder: 'other',
        expiresAt: new Date(Date.now() + 30_000),
      });
      expect((await attempt('me', 'token-6', 'rme')).won).toBe(false);
      expect(await collection.findOne({ _id: key })).toMatchObject({ owner: 'someone' });
    });
  });
});
