// Document locks and what the application's documents hold: a lock field with the
// application's own value, ids past 2^53 and -0, a created document's fields and version.
// Each test failed before its fix.
import { DBRef, Long, ObjectId } from 'mongodb';
import { InvalidLockOptionsError } from '../../lib/errors';
import { freshCollectionEachTest } from './fresh-collection';
import { LockTestKit, settle } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

describe('Document locks and the shapes of the application’s documents', () => {
  const kit = LockTestKit.forSuite();
  const fresh = freshCollectionEachTest(kit, 'field_shapes');

  describe('a lock field that holds the application’s own value', () => {
    const values: [string, unknown][] = [
      ['a string', 'reserved-by-admin'],
      ['a number', 7],
      ['an array', [{ line: [{ t: 'q', e: new Date(Date.now() + 60_000), h: 'x', f: 1 }] }]],
      ['an object whose line is not an array', { line: 'x' }],
      ['an object whose fence is not a number', { f: 'abc' }],
      ['an object whose fence is an ObjectId', { f: new ObjectId() }],
      ['a date', new Date(0)],
      ['an ObjectId', new ObjectId()],
      ['a DBRef', new DBRef('accounts', new ObjectId())],
    ];

    it.each(values)('is %s: InvalidLockOptionsError, nothing written', async (_kind, value) => {
      await fresh.collection.insertOne({ _id: 'd' as never, _lock: value });
      const documents = (await kit.service()).documents(fresh.name);
      const outcome = await settle(documents.acquire('d', { timeoutMs: 200 }));
      expect(outcome).toBeInstanceOf(InvalidLockOptionsError);
      expect((outcome as Error).message).toMatch(/its own value in the lock field "_lock"/);
      expect((await fresh.collection.findOne({ _id: 'd' as never }))?._lock).toEqual(value);
    });

    it.each([
      ['a fence that is not a number', { f: 'abc' }],
      ['entries that are not entries', { line: ['x', { t: 1 }] }],
    ])('with %s reads as no lock in inspect', async (_kind, value) => {
      await fresh.collection.insertOne({ _id: 'i' as never, _lock: value });
      const documents = (await kit.service()).documents(fresh.name);
      expect(await documents.inspect('i')).toMatchObject({ held: false, waiting: 0 });
    });

    it('is null: taken as no lock', async () => {
      await fresh.collection.insertOne({ _id: 'n' as never, _lock: null });
      const documents = (await kit.service()).documents(fresh.name);
      const handle = await documents.acquire('n');
      await handle.release();
      expect((await fresh.collection.findOne({ _id: 'n' as never }))?._lock).toMatchObject({
        line: [],
      });
    });
  });

  describe('ids', () => {
    it('locks a number id past 2^53 by its exact value', async () => {
      // The neighbour is where EJSON's rounded digits of 2^60 pointed (24 more).
      const exact = Long.fromBigInt(2n ** 60n);
      await fresh.collection.insertMany([
        { _id: exact as never, which: 'this' },
        { _id: exact.add(24) as never, which: 'neighbour' },
      ]);
      const documents = (await kit.service()).documents(fresh.name);
      const handle = await documents.acquire(2 ** 60);
      try {
        expect(handle.doc).toMatchObject({ which: 'this' });
      } finally {
        await handle.release();
      }
    });

    it('locks an embedded id holding a number past 2^53 by its exact value', async () => {
      const exact = Long.fromBigInt(2n ** 60n);
      await fresh.collection.insertMany([
        { _id: { a: exact } as never, which: 'this' },
        { _id: { a: exact.add(24) } as never, which: 'neighbour' },
      ]);
      const documents = (await kit.service()).documents(fresh.name);
      const handle = await documents.acquire({ a: 2 ** 60 });
      try {
        expect(handle.doc).toMatchObject({ which: 'this' });
      } finally {
        await handle.release();
      }
    });

    it('takes -0 inside an embedded id as 0: a nested lock re-enters', async () => {
      await fresh.collection.insertOne({ _id: { a: 0 } as never });
      const documents = (await kit.service()).documents(fresh.name);
      const inner = await settle(
        documents.withLock({ a: 0 }, () =>
          documents.withLock({ a: -0 }, () => 'ran', { timeoutMs: 500 }),
        ),
      );
      expect(inner).toBe('ran');
    });

    it('takes -0 as 0: a nested lock on the same document re-enters', async () => {
      await fresh.collection.insertOne({ _id: 0 as never });
      const documents = (await kit.service()).documents(fresh.name);
      const inner = await settle(
        documents.withLock(0, () => documents.withLock(-0, () => 'ran', { timeoutMs: 500 })),
      );
      expect(inner).toBe('ran');
    });
  });

  describe('createIfMissing', () => {
    it('refuses an object that where also names a field of: it would be made without it', async () => {
      const documents = (await kit.service()).documents(fresh.name, {
        version: { field: 'meta.v' },
      });
      const outcome = await settle(
        documents.acquire('n1', {
          where: { 'meta.tenant': 't1' },
          createIfMissing: { meta: { plan: 'free' } },
        }),
      );
      expect(outcome).toBeInstanceOf(InvalidLockOptionsError);
      expect((outcome as Error).message).toMatch(/"meta" while where names "meta.tenant"/);
      expect(await fresh.collection.countDocuments()).toBe(0);
    });

    it('refuses the same overlap inside a top-level $and, which an upsert also reads', async () => {
      const documents = (await kit.service()).documents(fresh.name, {
        version: { field: 'meta.v' },
      });
      const outcome = await settle(
        documents.acquire('n2', {
          where: { $and: [{ 'meta.tenant': 't1' }] },
          createIfMissing: { meta: { plan: 'free' } },
        }),
      );
      expect(outcome).toBeInstanceOf(InvalidLockOptionsError);
      expect(await fresh.collection.countDocuments()).toBe(0);
    });

    it.each<[string, Record<string, unknown>]>([
      ['$in', { tenant: { $in: ['t1', 't2'] } }],
      ['$ne', { archived: { $ne: true } }],
      ['a pattern', { tenant: /^t/ }],
      ['$or', { $or: [{ tenant: 't1' }] }],
      ['$in inside $and', { $and: [{ tenant: 't1' }, { plan: { $in: ['a'] } }] }],
      ['a Map (serialised with its $ keys)', { tenant: new Map([['$ne', 'x']]) }],
    ])(
      'refuses a where with %s beside createIfMissing: a created document would not meet it',
      async (_label, where) => {
        const documents = (await kit.service()).documents(fresh.name);
        const outcome = await settle(
          documents.acquire('n4', { where, createIfMissing: { tenant: 'other', archived: true } }),
        );
        expect(outcome).toBeInstanceOf(InvalidLockOptionsError);
        expect((outcome as Error).message).toMatch(/needs a where of equalities/);
        expect(await fresh.collection.countDocuments()).toBe(0);
      },
    );

    it('takes equalities, $eq and in $and too, beside createIfMissing', async () => {
      const documents = (await kit.service()).documents(fresh.name);
      const handle = await documents.acquire('n5', {
        where: { $and: [{ tenant: 't1' }, { plan: { $eq: 'free' } }] },
        createIfMissing: { balance: 0 },
      });
      expect(handle.created).toBe(true);
      expect(handle.doc).toMatchObject({ tenant: 't1', plan: 'free', balance: 0 });
      await handle.release();
    });

    it('does not refuse a where outside createIfMissing’s objects', async () => {
      const documents = (await kit.service()).documents(fresh.name, {
        version: { field: 'meta.v' },
      });
      const handle = await documents.acquire('n3', {
        where: { tenant: 't1' },
        createIfMissing: { meta: { plan: 'free' } },
      });
      expect(handle.doc).toEqual({ _id: 'n3', tenant: 't1', meta: { v: 0, plan: 'free' } });
      await handle.release();
    });

    it.each([3_000_000_000, -0, 2 ** 31])(
      'refuses an int version of %d, which would be stored as a double',
      async (version) => {
        const documents = (await kit.service()).documents(fresh.name, {
          version: { field: 'version' },
        });
        const outcome = await settle(documents.acquire('c', { createIfMissing: { version } }));
        expect(outcome).toBeInstanceOf(InvalidLockOptionsError);
        expect(await fresh.collection.countDocuments()).toBe(0);
      },
    );
  });
});
