import {
  InvalidLockKeyError,
  InvalidLockOptionsError,
  LockNotAcquiredError,
} from '../../lib/errors';
import { Logger } from '@nestjs/common';
import { firstValueFrom } from 'rxjs';
import { LockService } from '../../lib/lock.service';
import { countCommands, LockTestKit } from './lock-test-kit';

jest.setTimeout(60_000);

/** The commands other than the change stream's, which is the service's from start() to close(). */
const lockCommands = (names: string[]) =>
  names.filter((name) => !['aggregate', 'getMore', 'killCursors'].includes(name));

describe('LockService acquire and release', () => {
  const kit = LockTestKit.forSuite();

  it('grants a free key, refuses it while held, and grants it again with a larger fence', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const first = await a.acquire('orders:1');
    expect(first.key).toBe('orders:1');
    expect(first.expiresAt.getTime()).toBeGreaterThan(Date.now() + 25_000);
    expect(await b.tryAcquire('orders:1')).toBeNull();
    await first.release();
    expect(first.released).toBe(true);
    const second = await b.acquire('orders:1');
    expect(second.fence).toBeGreaterThan(first.fence);
    await second.release();
  });

  it('sends one small command per uncontended acquire and one per release', async () => {
    const client = await kit.client({ monitorCommands: true });
    const commands = countCommands(client);
    const locks = await kit.service({ client, ensureIndexes: false });
    await locks.acquire('warm-up').then((handle) => handle.release());
    commands.reset();

    const handle = await locks.acquire('counted');
    expect(lockCommands(commands.names)).toEqual(['findAndModify']);
    // A mutex's join is the short command; a shared or semaphore one is longer.
    expect(commands.sizes[commands.names.indexOf('findAndModify')]).toBeLessThan(4_000);
    commands.reset();
    await handle.release();
    expect(lockCommands(commands.names)).toEqual(['findAndModify']);
  });

  it('a wait that runs out reports the lease left at its end, not the lease it read on joining', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const held = await a.acquire('countdown', { ttlMs: 10_000, renew: false });
    const error = await b
      .acquire('countdown', { timeoutMs: 2_000 })
      .catch((caught: unknown) => caught);
    const { remainingMs } = (await b.inspect('countdown'))!;
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    const { retryAfterMs, holderId } = error as LockNotAcquiredError;
    expect(holderId).toBe(a.holderId);
    // Counted from b's join (read after the join's reply: a little long), read back since then.
    // The lease read on joining is 2 s longer.
    expect(retryAfterMs! - remainingMs).toBeGreaterThanOrEqual(0);
    expect(retryAfterMs! - remainingMs).toBeLessThan(1_000);
    await held.release();
  });

  it('timeoutMs 0 makes one attempt and reports the holder and its remaining lease', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const held = await a.acquire('report', { ttlMs: 20_000 });
    const client = await kit.client({ monitorCommands: true });
    const commands = countCommands(client);
    const c = await kit.service({ client, ensureIndexes: false });
    // From here: the start reads 0.1's collection once (docs/upgrading.md).
    commands.reset();
    const error = await c.acquire('report', { timeoutMs: 0 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    const notAcquired = error as LockNotAcquiredError;
    expect(notAcquired.keys).toEqual(['report']);
    expect(notAcquired.holderId).toBe(a.holderId);
    expect(notAcquired.retryAfterMs).toBeGreaterThan(15_000);
    expect(notAcquired.retryAfterMs).toBeLessThanOrEqual(20_000);
    expect(lockCommands(commands.names)).toEqual(['findAndModify']);
    expect(c.diagnostics).toMatchObject({ waiters: 0, held: 0 });
    // Nothing of c's is left in the key's line: the holder alone, nobody waiting.
    expect(await c.inspect('report')).toMatchObject({ held: true, waiting: 0 });
    await held.release();
    await b.close();
  });

  it('times out a wait with LockNotAcquiredError after about timeoutMs', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const held = await a.acquire('slow');
    // A join answered after the deadline fails the wait as unavailable: b's pool connection is
    // opened first, and the wait is long enough for the join's reply on a loaded machine.
    await b.inspect('slow');
    const timeoutMs = 1_000;
    const started = Date.now();
    await expect(b.acquire('slow', { timeoutMs })).rejects.toMatchObject({
      name: 'LockNotAcquiredError',
      holderId: a.holderId,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(timeoutMs - 10);
    expect(b.diagnostics.waiters).toBe(0);
    await held.release();
  });

  it('inspect reports the state by the server clock and never the owner token', async () => {
    const locks = await kit.service();
    expect(await locks.inspect('nothing-here')).toBeNull();
    const handle = await locks.acquire('seen', { ttlMs: 10_000 });
    const state = await locks.inspect('seen');
    expect(state).toMatchObject({
      key: 'seen',
      held: true,
      holderId: locks.holderId,
      fence: handle.fence,
    });
    expect(state!.remainingMs).toBeGreaterThan(8_000);
    const [raw] = await kit.rawLocks();
    const token = (raw.line as { t: string }[])[0].t;
    expect(typeof token).toBe('string');
    expect(
      JSON.stringify(state, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
    ).not.toContain(token);
    await handle.release();
    expect(await locks.inspect('seen')).toMatchObject({
      held: false,
      remainingMs: 0,
      fence: handle.fence,
    });
  });

  it.each([
    ['an empty key', ''],
    ['a NUL', 'a\0b'],
    ['an operator object', { $gt: '' }],
    ['a number', 42],
    ['an overlong key', 'k'.repeat(600)],
    ['an empty list', []],
  ])('rejects %s before writing anything', async (_label, key) => {
    const locks = await kit.service();
    await expect(locks.acquire(key as string)).rejects.toBeInstanceOf(InvalidLockKeyError);
    await expect(locks.withLock(key as string, () => 1)).rejects.toBeInstanceOf(
      InvalidLockKeyError,
    );
    await expect(locks.inspect(key as string)).rejects.toBeInstanceOf(InvalidLockKeyError);
    expect(await kit.rawLocks()).toEqual([]);
  });

  it.each([
    [{ ttlMs: -5 }, /ttlMs must be an integer from 1000 to 2147483647, got -5/],
    [{ timeoutMs: 1.5 }, /timeoutMs must be an integer from 0/],
    [
      { renew: { intervalRatio: 1 } },
      /renew.intervalRatio must be a number greater than 0 and less than 1/,
    ],
    [{ signal: 'stop' }, /signal must be an AbortSignal/],
    [{ timeOutMs: 0 }, /timeOutMs is not an option \(did you mean timeoutMs\?\)/],
    [{ transaction: true }, /transaction is not an option/],
  ])('rejects acquire options %p before writing anything', async (options, message) => {
    const locks = await kit.service();
    await expect(locks.acquire('k', options as never)).rejects.toThrow(message);
    await expect(locks.acquire('k', options as never)).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    expect(await kit.rawLocks()).toEqual([]);
  });

  it('tryAcquire and acquire$ check their options as acquire does', async () => {
    const locks = await kit.service();
    await expect(locks.tryAcquire('k', 5_000 as never)).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(locks.tryAcquire('k', { timeOutMs: 0 } as never)).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(
      firstValueFrom(locks.acquire$('k', { signal: {} as AbortSignal })),
    ).rejects.toThrow(/signal must be an AbortSignal/);
    expect(await kit.rawLocks()).toEqual([]);
  });

  it('list() passes over a document with an _id that is no key (one written by hand)', async () => {
    const a = await kit.service();
    const held = await a.acquire('orders:1');
    const lines = (await kit.client())
      .db(kit.mongo.dbName)
      .collection<{ _id: unknown }>(`${kit.collectionName}_line`);
    await lines.insertMany([{ _id: 42 }, { _id: { key: 'orders:2' } }]);

    expect((await a.list()).map((state) => state.key)).toEqual(['orders:1']);
    await held.release();
  });

  it('withLock refuses work that is not a function, and list an unknown option, before any command', async () => {
    const locks = await kit.service();
    await expect(locks.withLock('k', 5 as never)).rejects.toThrow(
      new InvalidLockOptionsError('fn must be a function, got 5', { option: 'fn' }),
    );
    await expect(locks.list({ prefx: 'k' } as never)).rejects.toThrow(
      /prefx is not an option \(did you mean prefix\?\)/,
    );
    expect(await kit.rawLocks()).toEqual([]);
  });

  it('rejects module options when constructed, naming the option and its range', () => {
    expect(() => new LockService(kit.options({ defaultTtlMs: -5 }))).toThrow(
      'defaultTtlMs must be an integer from 1000 to 2147483647, got -5',
    );
    expect(() => new LockService({ dbName: 'x' })).toThrow(InvalidLockOptionsError);
  });

  it('ensures the TTL and scope indexes, idempotently', async () => {
    const first = await kit.service();
    const second = await kit.service();
    await second.start();
    await first.start();
    const client = await kit.client();
    const indexes = await client
      .db(kit.mongo.dbName)
      .collection(`${kit.collectionName}_line`)
      .indexes();
    const byName = Object.fromEntries(indexes.map((index) => [index.name, index]));
    expect(byName.gcAt_ttl).toMatchObject({ key: { gcAt: 1 }, expireAfterSeconds: 0 });
    expect(byName.line_scope).toMatchObject({ key: { 'line.sc': 1 }, sparse: true });
    expect(indexes.map((index) => index.name).sort()).toEqual(['_id_', 'gcAt_ttl', 'line_scope']);
  });

  it('releaseAllHeld tells each holder, then frees its keys by owner token', async () => {
    const client = await kit.client({ monitorCommands: true });
    const commands = countCommands(client);
    const locks = await kit.service({ client });
    const other = await kit.service();
    const handles = [await locks.acquire('a'), await locks.acquire(['b', 'c'])];
    const foreign = await other.acquire('d');
    commands.reset();
    expect(await locks.releaseAllHeld()).toBe(3);
    expect(commands.names).toEqual(['findAndModify', 'findAndModify', 'findAndModify']);
    expect(handles.every((handle) => handle.released && handle.signal.aborted)).toBe(true);
    // Taken away from its holder: release says so, and sends nothing.
    await expect(handles[0].release()).rejects.toMatchObject({ name: 'LockLostError' });
    expect(commands.names).toHaveLength(3);
    expect(await locks.releaseAllHeld()).toBe(0);
    expect((await other.inspect('d'))?.held).toBe(true);
    expect(await other.tryAcquire(['a', 'b', 'c'])).not.toBeNull();
    await foreign.release();
  });

  it('close releases what it holds, rejects waiters, and closes only a client it created', async () => {
    const client = await kit.client();
    const given = await kit.service({ client });
    const own = await kit.service({ shutdownGraceMs: 200 });
    const held = await own.acquire('shutdown', { ttlMs: 60_000 });
    const waiting = given.acquire('shutdown', { timeoutMs: 30_000 });
    const waitingOutcome = waiting.catch((error: unknown) => error);
    await given.close();
    expect(await waitingOutcome).toMatchObject({
      name: 'LockServiceClosedError',
      message: 'LockService is closed',
    });
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    let warned: unknown[];
    try {
      await own.close();
    } finally {
      warned = warn.mock.calls.map(([message]) => message);
      warn.mockRestore();
    }
    // The handle nobody released is named, key and all, at the end of the grace period.
    expect(warned).toContainEqual(
      expect.stringMatching(
        /^1 lock\(s\) \("shutdown"\) still held after shutdownGraceMs \(200 ms\), by locked work still running or by a handle from acquire\(\) never released/,
      ),
    );
    expect(held.released).toBe(true);
    expect(held.signal.reason).toMatchObject({ name: 'LockLostError' });
    expect(await client.db(kit.mongo.dbName).command({ ping: 1 })).toMatchObject({ ok: 1 });
    const observer = await kit.service();
    expect((await observer.inspect('shutdown'))?.held).toBe(false);
    await expect(own.acquire('x')).rejects.toThrow('LockService is closed');
  });
});
