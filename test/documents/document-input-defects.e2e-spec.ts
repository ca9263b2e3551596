// Reported defects of document locks: `$` field names in updates, the type of a created
// version, and the busy message. Each test failed before its fix.
import { Decimal128, Long, Timestamp } from 'mongodb';
import type { Collection, Document } from 'mongodb';
import {
  InvalidLockKeyError,
  InvalidLockOptionsError,
  LockLostError,
  LockNotAcquiredError,
  MongoLockError,
  VersionConflictError,
} from '../../lib/errors';
import { MongoLockModule } from '../../lib';
import { LockTestKit, settle } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

interface Raw {
  _id: string;
  [field: string]: unknown;
}

describe('Document locks: reported input defects', () => {
  const kit = LockTestKit.forSuite();
  let seq = 0;
  let accounts: Collection<Raw>;
  let collectionName: string;

  beforeEach(async () => {
    seq += 1;
    collectionName = `input_defects_${seq}`;
    const client = await kit.client();
    accounts = client.db(kit.mongo.dbName).collection<Raw>(collectionName);
    await accounts.insertOne({ _id: 'a', balance: 100, version: 1 });
  });

  const documents = async () =>
    (await kit.service()).documents<Document>(collectionName, { version: { field: 'version' } });

  it('withLock refuses work that is not a function before it locks the document', async () => {
    const docs = await documents();
    const result = await settle(docs.withLock('a', 'not work' as never));
    expect(result).toBeInstanceOf(InvalidLockOptionsError);
    expect((result as Error).message).toBe('fn must be a function, got "not work"');
    expect(await accounts.findOne({ _id: 'a' })).toEqual({ _id: 'a', balance: 100, version: 1 });
  });

  describe('an update with a $-prefixed field name is InvalidLockOptionsError, nothing written', () => {
    const updates: [string, Document | Document[], string][] = [
      ['$where in $set', { $set: { $where: 'sleep(1000)' } }, '$where'],
      ['a $ field in $inc', { $inc: { $balance: 1 } }, '$balance'],
      ['a $ part of a dotted path', { $set: { 'meta.$x': 1 } }, 'meta.$x'],
      ['a $ target of $rename', { $rename: { balance: '$money' } }, '$money'],
      ['a $ field in a pipeline $set', [{ $set: { $where: 1 } }], '$where'],
      ['$where as the operator', { $where: 'true' }, '$where'],
      ['$[] in a pipeline (field names only)', [{ $set: { 'tags.$[]': 1 } }], 'tags.$[]'],
      ['a path with an empty part', { $set: { 'meta..x': 1 } }, 'meta..x'],
    ];

    it.each(updates)('commit: %s', async (_label, update, field) => {
      const service = await kit.service();
      const docs = service.documents<Document>(collectionName, { version: { field: 'version' } });
      const lock = await docs.acquire('a');
      const result = await settle(lock.commit(update));
      expect(result).toBeInstanceOf(InvalidLockOptionsError);
      expect((result as Error).message).toContain(JSON.stringify(field));
      // Not half-written: the document is as it was, and still locked by us.
      const stored = await accounts.findOne({ _id: 'a' });
      expect(stored).toMatchObject({ balance: 100, version: 1 });
      expect(stored?._lock).toMatchObject({ line: [{ h: service.holderId }] });
      expect((stored?._lock as { line: unknown[] }).line).toHaveLength(1);
      expect(Object.keys(stored ?? {}).filter((name) => name.startsWith('$'))).toEqual([]);
      // The handle is still usable: a corrected commit lands.
      await lock.commit({ $inc: { balance: 1 } });
      expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 101, version: 2 });
    });

    it.each(updates)('updateIfCurrent: %s', async (_label, update, field) => {
      const docs = await documents();
      const result = await settle(docs.updateIfCurrent('a', 1, update));
      expect(result).toBeInstanceOf(InvalidLockOptionsError);
      expect((result as Error).message).toContain(JSON.stringify(field));
      expect(await accounts.findOne({ _id: 'a' })).toEqual({
        _id: 'a',
        balance: 100,
        version: 1,
      });
    });

    it('an empty update, or a pipeline stage without fields, is refused before anything is sent', async () => {
      const docs = await documents();
      const lock = await docs.acquire('a');
      await expect(lock.update({})).rejects.toThrow('update must change at least one field');
      await expect(lock.update([])).rejects.toThrow('update must change at least one field');
      await expect(lock.update([{ $set: {} }])).rejects.toThrow(
        'a $set stage needs at least one field',
      );
      await expect(lock.commit([{ $unset: [] }])).rejects.toThrow(
        'a $unset stage needs at least one field',
      );
      expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 100, version: 1 });
      await lock.commit({ $inc: { balance: 1 } });
      expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 101, version: 2 });
    });

    it('tryAcquire and a nested withLock refuse option names they do not know', async () => {
      const docs = await documents();
      await expect(docs.tryAcquire('a', 5 as never)).rejects.toBeInstanceOf(
        InvalidLockOptionsError,
      );
      await docs.withLock('a', async () => {
        await expect(docs.withLock('a', () => 1, { timeOutMs: 0 } as never)).rejects.toThrow(
          /timeOutMs is not an option/,
        );
      });
    });

    it('$[] (every array element) is still accepted', async () => {
      await accounts.updateOne({ _id: 'a' }, { $set: { tags: [1, 2] } });
      const docs = await documents();
      await docs.updateIfCurrent('a', 1, { $inc: { 'tags.$[]': 1 } });
      expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ tags: [2, 3], version: 2 });
    });
  });

  describe('createIfMissing refuses a version of the wrong type', () => {
    it.each<[string, unknown]>([
      ['a numeric string', '1'],
      ['a string', 'abc'],
      ['a fraction', 1.5],
      ['null', null],
      ['an object', { n: 1 }],
      ['a Date', new Date()],
    ])('an int version given as %s', async (_label, value) => {
      const docs = await documents();
      const result = await settle(docs.acquire('new', { createIfMissing: { version: value } }));
      expect(result).toBeInstanceOf(InvalidLockOptionsError);
      expect((result as Error).message).toContain('"version"');
      expect(await accounts.findOne({ _id: 'new' })).toBeNull();
    });

    it('a decimal128 version given as a number', async () => {
      const docs = (await kit.service()).documents<Document>(collectionName, {
        version: { field: 'meta.v', type: 'decimal128' },
      });
      const result = await settle(docs.acquire('new', { createIfMissing: { meta: { v: 3 } } }));
      expect(result).toBeInstanceOf(InvalidLockOptionsError);
      expect(await accounts.findOne({ _id: 'new' })).toBeNull();
    });

    it('versions of the right type, or none, are accepted', async () => {
      const docs = await documents();
      const given = await docs.acquire('n1', { createIfMissing: { version: 7 } });
      await given.commit({ $set: { done: true } });
      const started = await docs.acquire('n2', { createIfMissing: { balance: 0 } });
      await started.commit();
      const decimals = (await kit.service()).documents<Document>(collectionName, {
        version: { field: 'meta.v', type: 'decimal128' },
      });
      const decimal = await decimals.acquire('n3', {
        createIfMissing: { meta: { v: Decimal128.fromString('2') } },
      });
      await decimal.commit({ $set: { done: true } });
      expect(await accounts.findOne({ _id: 'n1' })).toMatchObject({ version: 8, done: true });
      expect(await accounts.findOne({ _id: 'n2' })).toMatchObject({ version: 0 });
      expect((await accounts.findOne({ _id: 'n3' }))?.meta).toEqual({
        v: Decimal128.fromString('3'),
      });
    });
  });

  describe('a where equality on the version field, with createIfMissing', () => {
    it('of the wrong type is refused before anything is written', async () => {
      const docs = await documents();
      for (const where of [
        { version: '0' },
        { version: { $eq: '0' } },
        { $and: [{ tenant: 't1' }, { version: '0' }] },
        { 'version.n': 1 },
      ]) {
        const result = await settle(docs.acquire('y', { where, createIfMissing: { balance: 0 } }));
        expect(result).toBeInstanceOf(InvalidLockOptionsError);
        expect((result as InvalidLockOptionsError).option).toBe('where');
        expect((result as Error).message).toContain('"version"');
      }
      expect(await accounts.findOne({ _id: 'y' })).toBeNull();
    });

    it('of the right type makes the document with it, and commits', async () => {
      const docs = await documents();
      const lock = await docs.acquire('y', {
        where: { version: 3 },
        createIfMissing: { balance: 0 },
      });
      expect(lock.created).toBe(true);
      await lock.commit({ $inc: { balance: 5 } });
      expect(await accounts.findOne({ _id: 'y' })).toMatchObject({ balance: 5, version: 4 });
    });
  });

  describe('updateIfCurrent with a decimal128 version', () => {
    it('conflicts on a version that differs past a double’s precision', async () => {
      const docs = (await kit.service()).documents<Document>(collectionName, {
        version: { field: 'v', type: 'decimal128' },
      });
      const stored = Decimal128.fromString('1.00000000000000000001');
      await accounts.insertOne({ _id: 'precise', v: stored });
      const expected = Decimal128.fromString('1.00000000000000000002');
      const result = await settle(docs.updateIfCurrent('precise', expected, { $set: { n: 1 } }));
      expect(result).toBeInstanceOf(VersionConflictError);
      expect(await accounts.findOne({ _id: 'precise' })).toEqual({ _id: 'precise', v: stored });
    });
  });

  describe('a BSON Timestamp (a Long subclass to the bson library, another type to MongoDB)', () => {
    it('as an _id is locked and keyed as itself, not as the number of its bits', async () => {
      const byAnyId = accounts as unknown as Collection<{
        _id: Timestamp | Long;
        balance: number;
        version: number;
      }>;
      const stamp = new Timestamp({ t: 5, i: 1 });
      await byAnyId.insertOne({ _id: stamp, balance: 1, version: 0 });
      // The same 64 bits as a number: another document, another lock.
      await byAnyId.insertOne({ _id: Long.fromBigInt(21474836481n), balance: 2, version: 0 });
      const docs = await documents();
      const lock = await docs.acquire(stamp);
      expect(lock.key).toBe('{"$timestamp":{"t":5,"i":1}}');
      expect(lock.doc).toEqual({ _id: stamp, balance: 1, version: 0 });
      const number = await docs.tryAcquire(21474836481);
      expect(number?.doc).toMatchObject({ balance: 2 });
      await number?.release();
      await lock.commit({ $inc: { balance: 10 } });
      const created = await docs.acquire(new Timestamp({ t: 6, i: 0 }), {
        createIfMissing: { balance: 0 },
      });
      expect(created.doc._id).toEqual(new Timestamp({ t: 6, i: 0 }));
      await created.commit();
      expect(await byAnyId.findOne({ _id: stamp }, { projection: { _lock: 0 } })).toEqual({
        _id: stamp,
        balance: 11,
        version: 1,
      });
      expect(await accounts.countDocuments()).toBe(4);
    });

    it('as a version to create with is refused, nothing written', async () => {
      const docs = await documents();
      const result = await settle(
        docs.acquire('new', { createIfMissing: { version: new Timestamp({ t: 0, i: 0 }) } }),
      );
      expect(result).toBeInstanceOf(InvalidLockOptionsError);
      expect((result as Error).message).toContain('got a Timestamp');
      expect(await accounts.findOne({ _id: 'new' })).toBeNull();
    });

    it('as an expected version is refused, not a conflict, nothing written', async () => {
      await accounts.insertOne({ _id: 'zero', version: 0 });
      const docs = await documents();
      for (const [id, t] of [
        ['a', 1],
        ['zero', 0],
      ] as const) {
        const expected = new Timestamp({ t, i: 0 });
        const result = await settle(docs.updateIfCurrent(id, expected, { $set: { n: 1 } }));
        expect(result).toBeInstanceOf(InvalidLockOptionsError);
        expect((result as InvalidLockOptionsError).option).toBe('expectedVersion');
        expect((result as Error).message).toBe(
          'expectedVersion must be a int version, got a Timestamp',
        );
      }
      expect(await accounts.findOne({ _id: 'a' })).toEqual({ _id: 'a', balance: 100, version: 1 });
      expect(await accounts.findOne({ _id: 'zero' })).toEqual({ _id: 'zero', version: 0 });
    });
  });

  describe('a lone UTF-16 surrogate (stored as U+FFFD, so another id or field)', () => {
    it.each<[string, unknown]>([
      ['a high one in a string id', 'x\uD800y'],
      ['a low one ending a string id', 'x\uDC00'],
      ['one in a string of an embedded id', { tenant: 't\uDBFF', n: 1 }],
      ['one in a field name of an embedded id', { ['t\uDFFF']: 1 }],
    ])('%s is refused with InvalidLockKeyError, nothing written', async (_label, id) => {
      const docs = await documents();
      const calls = [
        () => docs.acquire(id, { createIfMissing: { balance: 0 } }),
        () => docs.withLock(id, () => 'ran'),
        () => docs.updateIfCurrent(id, 1, { $set: { n: 1 } }),
        () => docs.inspect(id),
      ];
      for (const call of calls) {
        const result = await settle(call());
        expect(result).toBeInstanceOf(InvalidLockKeyError);
        if (typeof id === 'string') expect((result as Error).message).toContain('lone surrogate');
      }
      expect(await accounts.find().toArray()).toEqual([{ _id: 'a', balance: 100, version: 1 }]);
    });

    it('a well-formed pair is accepted', async () => {
      const docs = await documents();
      const lock = await docs.acquire('x\uD83D\uDE00', { createIfMissing: { balance: 0 } });
      await lock.commit();
      expect(await accounts.findOne({ _id: 'x\uD83D\uDE00' })).toMatchObject({ version: 0 });
    });

    it.each<[string, object]>([
      ['lockField', { lockField: '_l\uD800' }],
      ['version.field', { version: { field: 'v\uDC00' } }],
      ['version.field', { version: { field: 'meta.v\uD800x' } }],
    ])('in %s is refused with InvalidLockOptionsError', async (option, settings) => {
      const service = await kit.service();
      const result = await settle(
        (async () => service.documents<Document>(collectionName, settings).acquire('a'))(),
      );
      expect(result).toBeInstanceOf(InvalidLockOptionsError);
      expect((result as InvalidLockOptionsError).option).toBe(option);
      expect((result as Error).message).toContain('no lone surrogate');
      expect(await accounts.find().toArray()).toEqual([{ _id: 'a', balance: 100, version: 1 }]);
    });
  });

  describe('the busy message', () => {
    it('quotes the id once and names the collection', async () => {
      const docs = await documents();
      const lock = await docs.acquire('a');
      const other = (await kit.service()).documents<Document>(collectionName);
      // Connected first: a join unanswered by a short deadline is unavailable, not busy.
      await other.inspect('a');
      const waited = await settle(other.acquire('a', { timeoutMs: 300 }));
      const atOnce = await settle(other.acquire('a', { timeoutMs: 0 }));
      for (const error of [waited, atOnce]) {
        expect(error).toBeInstanceOf(LockNotAcquiredError);
        const { message } = error as Error;
        expect(message).not.toContain('\\"');
        expect(message).toMatch(
          new RegExp(
            `^Document "a" of "${collectionName}" not acquired (within 300 ms|at once); held by `,
          ),
        );
      }
      expect((waited as LockNotAcquiredError).keys).toEqual(['"a"']);
      await lock.release();
    });
  });

  describe('the lost and released messages', () => {
    it('name the document as the busy message does', async () => {
      const docs = await documents();
      const subject = `Document "a" of "${collectionName}"`;
      // Lost: taken away from under the holder (the lock field rewritten by other code).
      const lost = await docs.acquire('a');
      await accounts.updateOne({ _id: 'a' }, { $unset: { _lock: '' } });
      const writes = [
        await settle(lost.commit({ $inc: { balance: 1 } })),
        await settle(lost.release()),
      ];
      for (const error of writes) {
        expect(error).toBeInstanceOf(LockLostError);
        expect((error as Error).message).toMatch(new RegExp(`^${subject} was lost: `));
      }
      expect((writes[0] as LockLostError).key).toBe('"a"');
      // Released: a write, or an extension, after the release.
      const released = await docs.acquire('a');
      await released.release();
      for (const error of [
        await settle(released.update({ $inc: { balance: 1 } })),
        await settle(released.extend()),
      ]) {
        expect(error).toBeInstanceOf(MongoLockError);
        expect((error as Error).message).toMatch(new RegExp(`^${subject} was released`));
      }
      expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 100, version: 1 });
    });
  });

  it('a version past 64 bits is no version: never wrapped onto a small one', async () => {
    const docs = await documents();
    await accounts.updateOne({ _id: 'a' }, { $set: { version: 5 } });
    // 2^64 + 5 wraps to 5 in a Long: it would match version 5.
    const wide = 2n ** 64n + 5n;
    const refused = await settle(docs.updateIfCurrent('a', wide, { $set: { balance: 0 } }));
    expect(refused).toBeInstanceOf(InvalidLockOptionsError);
    // As text (an If-Match ETag) of 19 digits past 2^63, it is a conflict: 2^63 would wrap to
    // -2^63, the version of a document stored so.
    await accounts.updateOne({ _id: 'b' }, { $set: { version: Long.MIN_VALUE } }, { upsert: true });
    const text = await settle(
      docs.updateIfCurrent('b', String(2n ** 63n), { $set: { balance: 0 } }),
    );
    expect(text).toBeInstanceOf(VersionConflictError);
    const created = await settle(docs.acquire('new', { createIfMissing: { version: 2n ** 64n } }));
    expect(created).toBeInstanceOf(InvalidLockOptionsError);
    expect(await accounts.findOne({ _id: 'a' })).toMatchObject({ balance: 100, version: 5 });
    expect(await accounts.findOne({ _id: 'new' })).toBeNull();
  });

  it('refuses a misspelt collection option, as other options are, before anything is written', async () => {
    const service = await kit.service();
    const misspelt: [Record<string, unknown>, RegExp][] = [
      [{ lockfield: 'lk' }, /^lockfield is not an option \(did you mean lockField\?\)/],
      [{ versoin: { field: 'version' } }, /^versoin is not an option \(did you mean version\?\)/],
      [{ version: { field: 'version', typ: 'date' } }, /^version\.typ is not an option/],
    ];
    for (const [options, message] of misspelt) {
      const refused = settle(
        Promise.resolve().then(() => service.documents(collectionName, options)),
      );
      await expect(refused).resolves.toBeInstanceOf(InvalidLockOptionsError);
      expect(((await refused) as Error).message).toMatch(message);
      expect(() =>
        MongoLockModule.forFeature([{ name: 'accounts', collection: collectionName, ...options }]),
      ).toThrow(new RegExp(`: ${message.source.slice(1)}`));
    }
    expect(await accounts.findOne({ _id: 'a' })).toEqual({ _id: 'a', balance: 100, version: 1 });
  });

  it("where may not name the document's _id or lock field, but may an array element's _id", async () => {
    const docs = await documents();
    const reserved: Document[] = [{ _id: 'a' }, { $or: [{ balance: 1 }, { _lock: null }] }];
    for (const where of reserved) {
      const refused = await settle(docs.acquire('a', { where }));
      expect(refused).toBeInstanceOf(InvalidLockOptionsError);
      expect((refused as Error).message).toMatch(/^where must not name (_id|_lock)/);
    }
    await accounts.updateOne({ _id: 'a' }, { $set: { members: [{ _id: 'u1', role: 'admin' }] } });
    const held = await docs.acquire('a', {
      where: { members: { $elemMatch: { _id: 'u1', role: 'admin' } } },
    });
    await held.release();
  });
});
