import { firstValueFrom } from 'rxjs';
import { Decimal128, ObjectId } from 'mongodb';
import type { Collection, Document, MongoClient } from 'mongodb';
import {
  DocumentLockedError,
  DocumentNotFoundError,
  InvalidLockKeyError,
  InvalidLockOptionsError,
  LockLostError,
  LockNotAcquiredError,
  VersionConflictError,
} from '../../lib/errors';
import { LockTestKit, eventually, listeningWhileHeld } from '../lock-service/lock-test-kit';
import type { DocumentLockHandle } from '../../lib/documents/document-lock-handle';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { ReplyDelayProxy } from '../support/reply-delay-proxy';

jest.setTimeout(60_000);

interface Account extends Document {
  _id: string;
  balance: number;
  tenant?: string;
  version?: number;
}

/** What the lock field holds while `holderId`'s call holds the document, and once it is free. */
const lockField = {
  v2: {
    held: { line: [{ h: expect.any(String) }] },
    free: { line: [] },
    takenOver: { '_lock.line.0.t': 'someone-else' },
    expired: { '_lock.line.0.e': new Date(0) },
  },
};

describe.each(['v2'] as const)('Document locks (engine %s)', (engine) => {
  const kit = LockTestKit.forSuite();
  const form = lockField[engine];
  let seq = 0;
  let accounts: Collection<Account>;
  let collectionName: string;

  beforeEach(async () => {
    seq += 1;
    collectionName = `accounts_${seq}`;
    const client = await kit.client();
    accounts = client.db(kit.mongo.dbName).collection<Account>(collectionName);
    await accounts.insertMany([
      { _id: 'a', balance: 100, tenant: 't1', version: 1 },
      { _id: 'b', balance: 5, tenant: 't2', version: 1 },
    ]);
  });

  it('locks a document, returns it without the lock field, and refuses a second holder', async () => {
    const one = (await kit.service({ engine })).documents<Account>(collectionName);
    const two = (await kit.service({ engine })).documents<Account>(collectionName);
    const lock = await one.acquire('a');
    expect(lock.doc).toEqual({ _id: 'a', balance: 100, tenant: 't1', version: 1 });
    expect(lock.created).toBe(false);
    expect(await two.tryAcquire('a')).toBeNull();
    const stored = await accounts.findOne({ _id: 'a' });
    expect(stored?._lock).toMatchObject(form.held);
    await lock.release();
    const again = await two.acquire('a');
    expect(again.fence).toBeGreaterThan(lock.fence);
    await again.release();
  });

  it('commit writes and unlocks in one update; the next holder sees the write', async () => {
    const docs = (await kit.service({ engine })).documents<Account>(collectionName);
    const lock = await docs.acquire('a');
    const after = await lock.commit({ $inc: { balance: -30 } });
    expect(after).toEqual({ _id: 'a', balance: 70, tenant: 't1', version: 1 });
    expect(lock.released).toBe(true);
    await lock.release(); // resolves after a commit
    const next = await docs.tryAcquire('a');
    expect(next?.doc.balance).toBe(70);
    await next?.release();
  });

  it('a commit MongoDB refuses leaves the document unchanged and unlocked', async () => {
    const docs = (await kit.service({ engine })).documents<Account>(collectionName);
    const lock = await docs.acquire('a');
    // Two operators on one field: the library passes it, MongoDB refuses it.
    const refused = lock.commit({ $set: { balance: 1 }, $inc: { balance: 1 } });
    await expect(refused).rejects.toThrow();
    await expect(lock.update({ $inc: { balance: 1 } })).rejects.toThrow(/released or committed/);
    await eventually(
      async () => (await accounts.countDocuments({ _id: 'a', '_lock.line': [] })) === 1,
    );
    const next = await docs.tryAcquire('a');
    expect(next?.doc).toEqual({ _id: 'a', balance: 100, tenant: 't1', version: 1 });
    await next?.release();
  });

  it('wakes a waiter when the holder commits, through the change stream', async () => {
    const holder = (await kit.service({ engine })).documents<Account>(collectionName);
    // Only the change stream can wake it in time: its safety poll is a minute away.
    const waiter = (await kit.service({ engine, safetyPollIntervalMs: 60_000 })).documents<Account>(
      collectionName,
    );
    const lock = await holder.acquire('a');
    const waiting = waiter.acquire('a', { timeoutMs: 10_000 });
    // In line behind the holder: the commit can reach it only as news.
    await eventually(async () => (await holder.inspect('a'))?.waiting === 1);
    const started = performance.now();
    await lock.commit([{ $set: { balance: { $add: ['$balance', 1] } } }]);
    const next = await waiting;
    // Not woken, it waits out its 10 s timeout (rejected).
    expect(performance.now() - started).toBeLessThan(1_000 + LOAD_SLACK_MS);
    expect(next.doc.balance).toBe(101);
    await next.release();
  });

  it('a holder whose lease was taken over cannot update nor commit', async () => {
    const first = (await kit.service({ engine })).documents<Account>(collectionName);
    const second = (await kit.service({ engine })).documents<Account>(collectionName);
    const stale = await first.acquire('a', { ttlMs: 1_000, renew: false });
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const current = await second.acquire('a');
    await expect(stale.update({ $inc: { balance: -1 } })).rejects.toBeInstanceOf(LockLostError);
    await expect(stale.commit({ $inc: { balance: -1 } })).rejects.toBeInstanceOf(LockLostError);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(100);
    await current.commit({ $inc: { balance: 1 } });
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(101);
  });

  it('fails at once with DocumentNotFoundError for a missing document or an unmet where', async () => {
    const docs = (await kit.service({ engine })).documents<Account>(collectionName);
    await expect(docs.acquire('missing', { timeoutMs: 5_000 })).rejects.toBeInstanceOf(
      DocumentNotFoundError,
    );
    await expect(docs.acquire('a', { where: { tenant: 't2' } })).rejects.toBeInstanceOf(
      DocumentNotFoundError,
    );
    const lock = await docs.acquire('a', { where: { tenant: 't1' } });
    await lock.release();
  });

  it('createIfMissing inserts once when callers race, and locks an existing document untouched', async () => {
    const services = await Promise.all([1, 2, 3, 4].map(() => kit.service({ engine })));
    const results = await Promise.all(
      services.map((service) =>
        service
          .documents<Account>(collectionName)
          .withLock('new', async (lock) => lock.created, { createIfMissing: { balance: 0 } }),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await accounts.findOne({ _id: 'new' }, { projection: { _lock: 0 } })).toEqual({
      _id: 'new',
      balance: 0,
    });
    const existing = await services[0]
      .documents<Account>(collectionName)
      .acquire('a', { createIfMissing: { balance: 999 } });
    expect(existing.created).toBe(false);
    expect(existing.doc.balance).toBe(100);
    await existing.release();
  });

  it('createIfMissing with where: an existing document of another tenant is not found, not overwritten', async () => {
    const docs = (await kit.service({ engine })).documents<Account>(collectionName);
    await expect(
      docs.acquire('b', { where: { tenant: 't1' }, createIfMissing: { balance: 0, tenant: 't1' } }),
    ).rejects.toBeInstanceOf(DocumentNotFoundError);
    expect((await accounts.findOne({ _id: 'b' }))?.tenant).toBe('t2');
    const created = await docs.acquire('c', {
      where: { tenant: 't1' },
      createIfMissing: { balance: 0 },
    });
    expect(created.created).toBe(true);
    expect(created.doc).toEqual({ _id: 'c', tenant: 't1', balance: 0 });
    await created.release();
  });

  it('updateIfCurrent applies at the expected version, bumps it, and reports conflicts', async () => {
    const docs = (await kit.service({ engine })).documents<Account>(collectionName, {
      version: { field: 'version' },
    });
    const updated = await docs.updateIfCurrent('a', 1, { $set: { balance: 50 } });
    expect(updated).toEqual({ _id: 'a', balance: 50, tenant: 't1', version: 2 });
    const conflict = await docs.updateIfCurrent('a', 1, { $set: { balance: 0 } }).catch((e) => e);
    expect(conflict).toBeInstanceOf(VersionConflictError);
    expect(conflict).toMatchObject({ expected: 1, current: 2 });
    await expect(docs.updateIfCurrent('zzz', 1, { $set: { balance: 0 } })).rejects.toBeInstanceOf(
      DocumentNotFoundError,
    );
    const lock = await docs.acquire('a');
    await expect(docs.updateIfCurrent('a', 2, { $set: { balance: 0 } })).rejects.toBeInstanceOf(
      DocumentLockedError,
    );
    const committed = await lock.commit({ $set: { balance: 1 } });
    expect(committed.version).toBe(3);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(1);
  });

  it('date and decimal128 versions strictly increase', async () => {
    await accounts.insertOne({
      _id: 'd',
      balance: 0,
      at: new Date(0),
      dec: Decimal128.fromString('1.5'),
    });
    const dated = (await kit.service({ engine })).documents(collectionName, {
      version: { field: 'at', type: 'date' },
    });
    let previous = 0;
    for (let i = 0; i < 5; i += 1) {
      const current = await dated.acquire('d');
      const written = await current.commit({ $inc: { balance: 1 } });
      const at = (written.at as Date).getTime();
      expect(at).toBeGreaterThan(previous);
      previous = at;
    }
    const decimal = (await kit.service({ engine })).documents(collectionName, {
      version: { field: 'dec', type: 'decimal128' },
    });
    const after = await decimal.updateIfCurrent('d', Decimal128.fromString('1.5'), [
      { $set: { balance: 0 } },
    ]);
    expect(String(after.dec)).toBe('2.5');
    // A version whose text has an exponent (as its ETag shows it) is matched by that text.
    await accounts.updateOne({ _id: 'd' }, { $set: { dec: Decimal128.fromString('1E+3') } });
    const exponent = await decimal.updateIfCurrent('d', '1E+3', { $set: { balance: 1 } });
    expect(String(exponent.dec)).toBe('1001');
    // Past a decimal's range: not a version (a client's If-Match answers 400, not 500).
    for (const text of ['1E+99999', '1'.repeat(40)]) {
      await expect(
        decimal.updateIfCurrent('d', text, { $set: { balance: 1 } }),
      ).rejects.toBeInstanceOf(InvalidLockOptionsError);
    }
  });

  it('refuses bad input with typed errors and writes nothing', async () => {
    const service = await kit.service({ engine });
    expect(() => service.documents(collectionName, { lockField: 'a.b' })).toThrow(
      InvalidLockOptionsError,
    );
    expect(() => service.documents(collectionName, { lockField: '$x' })).toThrow(
      InvalidLockOptionsError,
    );
    const docs = service.documents<Account>(collectionName, { version: { field: 'version' } });
    await expect(docs.acquire({ $gt: '' })).rejects.toBeInstanceOf(InvalidLockKeyError);
    await expect(docs.acquire(/a/)).rejects.toBeInstanceOf(InvalidLockKeyError);
    await expect(
      docs.updateIfCurrent('a', { $gt: 0 }, { $set: { balance: 0 } }),
    ).rejects.toBeInstanceOf(InvalidLockOptionsError);
    const lock = await docs.acquire('a');
    await expect(lock.update({ balance: 0 })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(lock.update({ $set: { _lock: null } })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await lock.release();
    const typed = service.documents(collectionName, { idType: 'objectId' });
    await expect(typed.acquire('not-an-id')).rejects.toBeInstanceOf(InvalidLockKeyError);
    await expect(typed.acquire(new ObjectId().toHexString())).rejects.toBeInstanceOf(
      DocumentNotFoundError,
    );
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(100);
  });

  it('a replacement by code that ignores the lock wipes it: the holder learns, waiters wake', async () => {
    const holder = (await kit.service({ engine })).documents<Account>(collectionName);
    // Its safety poll is a minute away: only the change can wake it in time.
    const client = await kit.client({ monitorCommands: true });
    const waiter = (
      await kit.service({ engine, client, safetyPollIntervalMs: 60_000 })
    ).documents<Account>(collectionName);
    const lock = await holder.acquire('a');
    const listening = listeningWhileHeld(client, collectionName);
    const woken = firstValueFrom(waiter.waitForRelease('a'));
    // Its look saw 'a' held and its stream is open: only a wake-up can end the wait now.
    await listening;
    const replacedAt = performance.now();
    await accounts.replaceOne({ _id: 'a' }, { _id: 'a', balance: 1 });
    await woken;
    // Not woken by the change, it waits for the poll (60 s) or the lease end (30 s).
    expect(performance.now() - replacedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    await expect(lock.commit({ $inc: { balance: 1 } })).rejects.toBeInstanceOf(LockLostError);
    expect(lock.lost).toBe(true);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(1);
  });

  it('times out with LockNotAcquiredError while another holds the document', async () => {
    const holder = (await kit.service({ engine })).documents<Account>(collectionName);
    const waiter = (await kit.service({ engine })).documents<Account>(collectionName);
    const lock = await holder.acquire('a');
    await expect(waiter.acquire('a', { timeoutMs: 300 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    const state = await waiter.inspect('a');
    expect(state).toMatchObject({ held: true, holderId: expect.any(String) });
    await lock.release();
    expect((await waiter.inspect('a'))?.held).toBe(false);
  });

  it('shutdown tells the holder and releases its document lock', async () => {
    const service = await kit.service({ engine });
    const lock = await service.documents<Account>(collectionName).acquire('a');
    await service.close();
    expect(lock.lost).toBe(true);
    expect(lock.signal.aborted).toBe(true);
    const stored = await accounts.findOne({ _id: 'a' });
    expect(stored?._lock).toMatchObject(form.free);
  });

  it('the server decides: a write by a holder whose lease the server gave away lands nowhere', async () => {
    const docs = (await kit.service({ engine })).documents<Account>(collectionName);
    // The holder still believes it holds (as a paused process would); the server says otherwise.
    const overtaken = await docs.acquire('a');
    await accounts.updateOne({ _id: 'a' }, { $set: form.takenOver });
    await expect(overtaken.update({ $inc: { balance: -1 } })).rejects.toBeInstanceOf(LockLostError);
    const expired = await docs.acquire('b');
    await accounts.updateOne({ _id: 'b' }, { $set: form.expired });
    await expect(expired.commit({ $inc: { balance: -1 } })).rejects.toBeInstanceOf(LockLostError);
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(100);
    expect((await accounts.findOne({ _id: 'b' }))?.balance).toBe(5);
  });

  it('withLock rejects with LockLostError when fn succeeded but the lock was lost', async () => {
    const docs = (await kit.service({ engine })).documents<Account>(collectionName);
    let ran = false;
    const outcome = docs.withLock('a', async () => {
      // Other code ends our entry's lease while fn runs: its release finds the lock gone.
      await accounts.updateOne({ _id: 'a' }, { $set: form.expired });
      ran = true;
      return 'done';
    });
    await expect(outcome).rejects.toBeInstanceOf(LockLostError);
    expect(ran).toBe(true);
  });

  it("a re-entered document lock still checks the inner call's where", async () => {
    const docs = (await kit.service({ engine })).documents<Account>(collectionName);
    const inner = await docs.withLock(
      'a',
      async (outer) => {
        await expect(
          docs.withLock('a', () => 'ran', { where: { tenant: 't2' } }),
        ).rejects.toBeInstanceOf(DocumentNotFoundError);
        return docs.withLock('a', (same) => same === outer, { where: { tenant: 't1' } });
      },
      { where: { tenant: 't1' } },
    );
    expect(inner).toBe(true);
  });

  it('a re-entered document lock refuses the options a first call refuses', async () => {
    const docs = (await kit.service({ engine })).documents<Account>(collectionName);
    const refusals = await docs.withLock('a', async () =>
      Promise.all(
        [{ mode: 'shared' as const }, { permits: 2 }, { scope: 'job' }].map((options) =>
          docs.withLock('a', () => 'ran', options).catch((error: unknown) => error),
        ),
      ),
    );
    for (const refusal of refusals) expect(refusal).toBeInstanceOf(InvalidLockOptionsError);
  });
});

describe('Document locks on engine v2', () => {
  const kit = LockTestKit.forSuite();
  let accounts: Collection<Account>;

  /** Two services' locks on the collection; the second's safety poll is a minute away. */
  /** The other's service uses `client` when given. */
  const holderAndDeafOther = async (client?: MongoClient) => [
    (await kit.service({ engine: 'v2' })).documents<Account>(accounts.collectionName),
    (
      await kit.service({ engine: 'v2', safetyPollIntervalMs: 60_000, ...(client && { client }) })
    ).documents<Account>(accounts.collectionName),
  ];

  beforeEach(async () => {
    const client = await kit.client();
    accounts = client.db(kit.mongo.dbName).collection<Account>(`v2_${kit.collectionName}`);
    await accounts.insertMany([
      { _id: 'a', balance: 100 },
      { _id: 'b', balance: 5 },
    ]);
  });

  it('keeps only the line in the lock field: the holder first, waiters after, none once free', async () => {
    const docs = (await kit.service({ engine: 'v2' })).documents<Account>(accounts.collectionName);
    const other = (await kit.service({ engine: 'v2' })).documents<Account>(accounts.collectionName);
    const lock = await docs.acquire('a');
    const waiting = other.acquire('a', { timeoutMs: 10_000 });
    await eventually(async () => (await docs.inspect('a'))?.waiting === 1, 5_000);
    const stored = (await accounts.findOne({ _id: 'a' }))?._lock as Document;
    expect(Object.keys(stored).sort()).toEqual(['f', 'line']);
    expect(stored.line).toHaveLength(2);
    await lock.commit({ $inc: { balance: 1 } });
    const next = await waiting;
    expect(next.doc.balance).toBe(101);
    expect(next.fence).toBeGreaterThan(lock.fence);
    await next.release();
    const free = (await accounts.findOne({ _id: 'a' }))?._lock as Document;
    expect(free.line).toEqual([]);
    // `lead` names the last leaver's token, for the streams of events$ and waitForRelease.
    expect(Object.keys(free).sort()).toEqual(['f', 'lead', 'line']);
  });

  it('a waiter reads the document the last holder committed, whatever form the commit took', async () => {
    const docs = (await kit.service({ engine: 'v2' })).documents<Account>(accounts.collectionName);
    const other = (await kit.service({ engine: 'v2' })).documents<Account>(accounts.collectionName);
    for (const update of [
      { $inc: { balance: 7 } },
      [{ $set: { balance: { $add: ['$balance', 7] } } }],
    ]) {
      const before = (await accounts.findOne({ _id: 'b' }))?.balance as number;
      const lock = await docs.acquire('b');
      const waiting = other.acquire('b', { timeoutMs: 10_000 });
      await eventually(async () => (await docs.inspect('b'))?.waiting === 1, 5_000);
      await lock.commit(update);
      const next = await waiting;
      expect(next.doc.balance).toBe(before + 7);
      await next.release();
    }
  });

  it.each([
    ['its line removed', { $unset: { '_lock.line': '' } }],
    ['the lock field set to null', { $set: { _lock: null } }],
    ['the lock field set to {}', { $set: { _lock: {} } }],
  ])('other code unlocking by hand (%s) wakes a waiting acquire at once', async (_how, unlock) => {
    // Its entry's renewal (a third of 30 s) and safety poll are far: only the change wakes it.
    const [holder, waiter] = await holderAndDeafOther();
    const lock = await holder.acquire('a', { ttlMs: 30_000 });
    const waiting = waiter.acquire('a', { ttlMs: 30_000, timeoutMs: 20_000 });
    await eventually(async () => (await holder.inspect('a'))?.waiting === 1, 5_000);
    const freedAt = performance.now();
    await accounts.updateOne({ _id: 'a' }, unlock);
    const next = await waiting;
    expect(performance.now() - freedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    expect(next.fence).toBeGreaterThan(lock.fence);
    await expect(lock.commit({ $inc: { balance: 1 } })).rejects.toBeInstanceOf(LockLostError);
    await next.release();
  });

  it('a waiter takes the document from the change event that made it holder, unless it has a where', async () => {
    const client = await kit.client({ monitorCommands: true });
    const finds: unknown[] = [];
    client.on('commandStarted', (event) => {
      if (event.commandName === 'find') finds.push(event.command.filter);
    });
    const holder = (await kit.service({ engine: 'v2' })).documents<Account>(
      accounts.collectionName,
    );
    const waiter = (await kit.service({ engine: 'v2', client })).documents<Account>(
      accounts.collectionName,
    );
    // From here: the start reads 0.1's collection once (docs/upgrading.md).
    finds.length = 0;
    const lock = await holder.acquire('a');
    const waiting = waiter.acquire('a', { timeoutMs: 10_000 });
    await eventually(async () => (await holder.inspect('a'))?.waiting === 1, 5_000);
    await lock.commit({ $set: { tenant: 't2' } });
    const next = await waiting;
    expect(next.doc).toMatchObject({ _id: 'a', tenant: 't2' });
    expect(finds).toEqual([]);
    // With a where, the event's document is not trusted: a read checks it, and it fails.
    const waitingWhere = waiter.acquire('a', { timeoutMs: 10_000, where: { tenant: 't2' } });
    await eventually(async () => (await holder.inspect('a'))?.waiting === 1, 5_000);
    await next.commit({ $set: { tenant: 't3' } });
    await expect(waitingWhere).rejects.toBeInstanceOf(DocumentNotFoundError);
    expect(finds).toHaveLength(1);
    expect((await holder.inspect('a'))?.held).toBe(false);
  });

  it('a commit names the waiter it saw behind it the next leader; if that one left, every process looks', async () => {
    const services = await Promise.all([1, 2, 3].map(() => kit.service({ engine: 'v2' })));
    const [blocking, holding, behind] = services.map((service) =>
      service.documents<Account>(accounts.collectionName),
    );
    const waitingIn = async (count: number) =>
      eventually(async () => (await blocking.inspect('a'))?.waiting === count, 5_000);
    const lead = async () =>
      ((await accounts.findOne({ _id: 'a' }))?._lock as Document).lead as string;
    for (const successorLeaves of [false, true]) {
      // The line: blocker, holder, successor. The holder, told by the blocker's release, reads it.
      const blocker = await blocking.acquire('a');
      const holderWaits = holding.acquire('a', { timeoutMs: 10_000 });
      await waitingIn(1);
      const successorWaits = behind.acquire('a', { timeoutMs: successorLeaves ? 1_500 : 10_000 });
      await waitingIn(2);
      await blocker.release();
      const holder = await holderWaits;
      let next: Promise<DocumentLockHandle<Account>> = successorWaits;
      if (successorLeaves) {
        await expect(successorWaits).rejects.toBeInstanceOf(LockNotAcquiredError);
        await waitingIn(0); // its leave, sent after it gave up, has landed
        next = blocking.acquire('a', { timeoutMs: 10_000 });
        await waitingIn(1);
      }
      const committedAt = performance.now();
      await holder.commit({ $inc: { balance: 1 } });
      const written = await lead();
      if (successorLeaves) expect(written).toMatch(/^\* /);
      else expect(written.startsWith(`${services[2].holderId} `)).toBe(true);
      const successor = await next;
      expect(performance.now() - committedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
      // Nobody behind the successor when it read the line: its commit wakes no process.
      await successor.commit({ $inc: { balance: 1 } });
      expect(await lead()).toMatch(/^- /);
    }
    expect((await accounts.findOne({ _id: 'a' }))?.balance).toBe(104);
  });

  it('a join whose reply was lost, retried and answered "not found", leaves the entry it made', async () => {
    const target = new URL(kit.mongo.uri);
    const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
    await proxy.start();
    try {
      const locks = (
        await kit.service({
          engine: 'v2',
          operationTimeoutMs: 300,
          uri: `mongodb://127.0.0.1:${proxy.port}/?directConnection=true`,
        })
      ).documents<Account>(accounts.collectionName);
      await accounts.updateOne({ _id: 'a' }, { $set: { tenant: 't1' } });
      const held = proxy.holdNextReply('findAndModify', 1_500);
      const acquiring = locks.acquire('a', {
        where: { tenant: 't1' },
        ttlMs: 20_000,
        timeoutMs: 5_000,
      });
      await held; // the join landed (our entry holds); its reply comes too late
      await accounts.updateOne({ _id: 'a' }, { $set: { tenant: 't2' } });
      await expect(acquiring).rejects.toBeInstanceOf(DocumentNotFoundError); // the retry's answer
      await eventually(async () => (await locks.inspect('a'))?.held === false, 5_000);
    } finally {
      await kit.cleanup();
      await proxy.stop();
    }
  });

  it.each([
    ['release()', (lock: DocumentLockHandle<Account>) => lock.release()],
    [
      'a commit of an update document',
      (lock: DocumentLockHandle<Account>) => lock.commit({ $inc: { balance: 1 } }),
    ],
    [
      'a pipeline commit',
      (lock: DocumentLockHandle<Account>) => lock.commit([{ $set: { balance: 1 } }]),
    ],
  ])(
    'waitForRelease elsewhere hears %s of a document nobody else waited for',
    async (_end, end) => {
      const client = await kit.client({ monitorCommands: true });
      const [holder, watcher] = await holderAndDeafOther(client);
      const lock = await holder.acquire('b', { ttlMs: 30_000 });
      const listening = listeningWhileHeld(client, accounts.collectionName);
      const released = firstValueFrom(watcher.waitForRelease('b'));
      // Its look saw 'b' held and its stream is open: only a wake-up can end the wait now.
      await listening;
      const endedAt = performance.now();
      await end(lock);
      await released;
      // Not heard, it would wait for its safety poll (60 s) or the lease's end (30 s).
      expect(performance.now() - endedAt).toBeLessThan(1_000 + LOAD_SLACK_MS);
    },
  );

  it("a lock field removed while the waiter's join reply is on its way still wakes it", async () => {
    const target = new URL(kit.mongo.uri);
    const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
    await proxy.start();
    try {
      const holder = (await kit.service({ engine: 'v2' })).documents<Account>(
        accounts.collectionName,
      );
      const waiter = (
        await kit.service({
          engine: 'v2',
          safetyPollIntervalMs: 60_000,
          uri: `mongodb://127.0.0.1:${proxy.port}/?directConnection=true`,
        })
      ).documents<Account>(accounts.collectionName);
      const lock = await holder.acquire('a', { ttlMs: 30_000 });
      expect(await waiter.tryAcquire('a')).toBeNull(); // its change stream is open
      const held = proxy.holdNextReply('findAndModify', 1_000);
      const waiting = waiter.acquire('a', { ttlMs: 30_000, timeoutMs: 25_000 });
      await held; // the join landed; its reply comes 1 s later
      await accounts.updateOne({ _id: 'a' }, { $unset: { _lock: '' } });
      const removedAt = performance.now();
      const next = await waiting;
      // Missed, it would look again at its renewal, 10 s after its join.
      expect(performance.now() - removedAt).toBeLessThan(2_000 + LOAD_SLACK_MS);
      await expect(lock.commit({ $inc: { balance: 1 } })).rejects.toBeInstanceOf(LockLostError);
      await next.release();
    } finally {
      await kit.cleanup();
      await proxy.stop();
    }
  });

  it('a missing document costs one command, and leaves nothing to clean up', async () => {
    const client = await kit.client({ monitorCommands: true });
    const docs = (await kit.service({ engine: 'v2', client })).documents<Account>(
      accounts.collectionName,
    );
    const sent: string[] = [];
    client.on('commandStarted', (event) => {
      // The collection's change stream opens on first use: not counted.
      if (!['aggregate', 'getMore'].includes(event.commandName)) sent.push(event.commandName);
    });
    await expect(docs.acquire('missing', { timeoutMs: 5_000 })).rejects.toBeInstanceOf(
      DocumentNotFoundError,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(sent).toEqual(['findAndModify']);
  });

  it('does not pass over a live lease of the 0.1 lock field, and converts a released one', async () => {
    const docs = (await kit.service({ engine: 'v2' })).documents<Account>(accounts.collectionName);
    const v1Fence = 5_000_000_000_000;
    await accounts.updateOne(
      { _id: 'a' },
      {
        $set: {
          _lock: {
            owner: 'v1-owner',
            holder: 'v1-service',
            fence: v1Fence,
            lostFence: 0,
            acquiredAt: new Date(),
            expiresAt: new Date(Date.now() + 60_000),
          },
        },
      },
    );
    await expect(docs.acquire('a', { timeoutMs: 300 })).rejects.toThrow(
      /^Document "a" of ".*" not acquired: its lock field is in the 0\.1 form, held by a 0\.1 process \(v1-service\) for about/,
    );
    expect(((await accounts.findOne({ _id: 'a' }))?._lock as Document).owner).toBe('v1-owner');
    await accounts.updateOne(
      { _id: 'a' },
      { $set: { '_lock.owner': null }, $unset: { '_lock.expiresAt': '', '_lock.acquiredAt': '' } },
    );
    const lock = await docs.acquire('a');
    expect(lock.fence).toBeGreaterThan(BigInt(v1Fence));
    expect(Object.keys((await accounts.findOne({ _id: 'a' }))?._lock as Document).sort()).toEqual([
      'f',
      'line',
    ]);
    await lock.release();
  });
});
