// Document locks on collections that a Mongoose model also writes: the lock lives in `_lock`,
// a field the model's schema does not declare (strict mode, the default).
import mongoose from 'mongoose';
import type { Connection, Model } from 'mongoose';
import type { Collection, Document } from 'mongodb';
import { LockLostError, VersionConflictError } from '../../lib/errors';
import { LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

interface AccountFields {
  _id: string;
  balance: number;
  tags: string[];
  __v?: number;
}

interface SentCommand {
  commandName: string;
  command: Record<string, any>;
}

const accountDefinition = {
  _id: String,
  balance: { type: Number, required: true },
  tags: [String],
};

describe('Document locks on a collection written through Mongoose', () => {
  const kit = LockTestKit.forSuite();

  // Nested, so that the connection closes (this afterAll) before the kit stops the server.
  describe('with a strict Mongoose model', () => {
    let connection: Connection;
    let sent: SentCommand[];
    let seq = 0;
    let Account: Model<AccountFields>;
    let raw: Collection<Document>;

    beforeAll(async () => {
      connection = await mongoose
        .createConnection(kit.mongo.uri, { dbName: kit.mongo.dbName, monitorCommands: true })
        .asPromise();
      sent = [];
      connection.getClient().on('commandStarted', (event: SentCommand) => {
        if (['update', 'insert', 'findAndModify', 'delete'].includes(event.commandName)) {
          sent.push({ commandName: event.commandName, command: event.command });
        }
      });
    });

    afterAll(() => connection.close());

    /** A model of its own (its own collection), optimistic concurrency if asked. */
    function defineModel(name: string, optimisticConcurrency = false) {
      seq += 1;
      const schema = new mongoose.Schema<AccountFields>(accountDefinition, {
        optimisticConcurrency,
      });
      return connection.model<AccountFields>(`${name}${seq}`, schema, `mongoose_${name}_${seq}`);
    }

    beforeEach(async () => {
      Account = defineModel('accounts');
      await Account.create([
        { _id: 'a', balance: 100 },
        { _id: 'b', balance: 5 },
      ]);
      raw = (await kit.client()).db(kit.mongo.dbName).collection(Account.collection.collectionName);
      sent.length = 0;
    });

    /** The lock field as stored, read past Mongoose. */
    async function storedLock(id: string): Promise<Record<string, any> | undefined> {
      const stored = await raw.findOne({ _id: id as any });
      return stored?._lock as Record<string, any> | undefined;
    }

    async function documents(version?: { field: string; type: 'int' }) {
      const service = await kit.service();
      return service.documents(Account.collection.collectionName, version ? { version } : {});
    }

    it('save() of a locked document $sets only its modified paths: the lock survives and still refuses others', async () => {
      const holder = await documents();
      const other = await documents();
      // Loaded before the lock existed: a save that wrote the whole document would erase it.
      const account = await Account.findById('a').orFail();
      expect(account.get('_lock')).toBeUndefined();
      const lock = await holder.acquire('a');
      const lockBefore = await storedLock('a');
      expect(lockBefore).toMatchObject({
        line: [{ t: expect.any(String), h: expect.any(String), e: expect.any(Date) }],
      });
      // Strict mode keeps a field it does not know when it comes from the database...
      expect((await Account.findById('a').orFail()).get('_lock')).toEqual(lockBefore);
      sent.length = 0;

      account.balance = 70;
      account.tags.push('paid');
      await account.save();

      // ...and save() sends only what changed: $set of the modified path, $push to the array.
      expect(sent.map((c) => c.commandName)).toEqual(['update']);
      const [statement] = sent[0].command.updates as { q: Document; u: Document }[];
      expect(statement.q).toEqual({ _id: 'a' });
      expect(statement.u).toEqual({
        $set: { balance: 70 },
        $push: { tags: { $each: ['paid'] } },
        $inc: { __v: 1 },
      });
      expect(await storedLock('a')).toEqual(lockBefore);

      // The lock still works: nobody else gets it, and release frees it.
      expect(await other.tryAcquire('a')).toBeNull();
      await lock.release();
      expect((await storedLock('a'))?.line).toEqual([]);
      const next = await other.acquire('a');
      expect(next.fence).toBeGreaterThan(lock.fence);
      expect(next.doc).toEqual({ _id: 'a', balance: 70, tags: ['paid'], __v: 1 });
      await next.release();
    });

    it('even overwrite() + save() $unsets only schema paths: the lock field stays', async () => {
      const holder = await documents();
      const lock = await holder.acquire('a');
      const lockBefore = await storedLock('a');
      const account = await Account.findById('a').orFail();
      account.overwrite({ _id: 'a', balance: 1 });
      await account.save();
      const [statement] = sent[0].command.updates as { u: Document }[];
      expect(statement.u).toEqual({ $set: { balance: 1 }, $unset: { tags: 1 } });
      expect(await storedLock('a')).toEqual(lockBefore);
      const committed = await lock.commit({ $inc: { balance: 1 } });
      expect(committed).toEqual({ _id: 'a', balance: 2, __v: 0 });
    });

    it('strict mode drops _lock from new documents and from Mongoose updates: no forged or cleared lock', async () => {
      const docs = await documents();
      const other = await documents();
      // A live entry of somebody else's, as the library would write it.
      const forged = {
        f: 1,
        line: [{ t: 'forged', f: 1, e: new Date(Date.now() + 60_000), h: 'forged' }],
      };
      // A new document: create() inserts without the undeclared field, so it is free.
      await Account.create({ _id: 'n', balance: 1, _lock: forged } as unknown as AccountFields);
      expect(await raw.findOne({ _id: 'n' as any })).toEqual({
        _id: 'n',
        balance: 1,
        tags: [],
        __v: 0,
      });
      const onNew = await docs.acquire('n', { timeoutMs: 0 });
      await onNew.release();

      // An existing, locked document: updates naming _lock are stripped to nothing.
      const lock = await docs.acquire('a');
      const lockBefore = await storedLock('a');
      sent.length = 0;
      await Account.updateOne({ _id: 'a' }, { $set: { _lock: null } });
      await Account.updateOne({ _id: 'a' }, { $unset: { _lock: 1 } });
      await Account.findOneAndUpdate({ _id: 'a' }, { $set: { '_lock.line': [] } });
      await Account.updateOne({ _id: 'a' }, { $set: { balance: 99, _lock: forged } });
      const updates = sent.flatMap((c) =>
        c.commandName === 'update' ? (c.command.updates as { u: Document }[]).map((s) => s.u) : [],
      );
      expect(updates).toEqual([{ $set: { balance: 99 } }]);
      expect(await storedLock('a')).toEqual(lockBefore);
      expect(await other.tryAcquire('a')).toBeNull();
      const committed = await lock.commit({ $inc: { balance: 1 } });
      expect(committed.balance).toBe(100);
    });

    it('commit through the library is what Mongoose findById reads next', async () => {
      const docs = await documents();
      const lock = await docs.acquire('a');
      await lock.commit({ $inc: { balance: -30 }, $push: { tags: 'debited' } });
      const account = await Account.findById('a').orFail();
      expect(account.balance).toBe(70);
      expect([...account.tags]).toEqual(['debited']);
      // Released: the line is empty.
      expect(account.get('_lock')).toMatchObject({ line: [] });
      // A lean read returns the same, lock field included (a live lock's owner token too:
      // project it out, or declare it with select: false, before sending documents out).
      const lean = await Account.findById('a').lean().orFail();
      expect(lean).toMatchObject({ _id: 'a', balance: 70, tags: ['debited'], __v: 0 });
      expect(lean).toHaveProperty('_lock');
      // The unlocked document can be locked again, and Mongoose's own writes go on.
      account.balance = 71;
      await account.save();
      const again = await docs.acquire('a', { timeoutMs: 0 });
      expect(again.doc.balance).toBe(71);
      await again.release();
    });

    it('declaring _lock as Mixed with select: false hides the lock from Mongoose reads; save leaves it', async () => {
      seq += 1;
      const schema = new mongoose.Schema<AccountFields & { _lock?: unknown }>({
        ...accountDefinition,
        _lock: { type: mongoose.Schema.Types.Mixed, select: false },
      });
      const Hidden = connection.model<AccountFields & { _lock?: unknown }>(
        `hidden${seq}`,
        schema,
        `mongoose_hidden_${seq}`,
      );
      await Hidden.create({ _id: 'h', balance: 10 });
      const docs = (await kit.service()).documents(Hidden.collection.collectionName);
      const other = (await kit.service()).documents(Hidden.collection.collectionName);
      const lock = await docs.acquire('h');
      const account = await Hidden.findById('h').orFail();
      expect(account.toObject()).toEqual({ _id: 'h', balance: 10, tags: [], __v: 0 });
      expect(await Hidden.findById('h').lean()).not.toHaveProperty('_lock');
      account.balance = 11;
      await account.save();
      expect(await other.tryAcquire('h')).toBeNull();
      const committed = await lock.commit({ $inc: { balance: 1 } });
      expect(committed.balance).toBe(12);
    });

    it('the lock is advisory: a Mongoose save while another holds it lands, and the holder commits on top', async () => {
      const holder = await documents();
      const other = await documents();
      const lock = await holder.acquire('a');
      const account = await Account.findById('a').orFail();
      account.balance = 1;
      await account.save();
      // Nothing stopped the plain write; the lock is still held, and the holder's copy is stale.
      expect((await Account.findById('a').orFail()).balance).toBe(1);
      expect(lock.doc.balance).toBe(100);
      expect(await other.tryAcquire('a')).toBeNull();
      // The holder's commit lands (it is still held) and applies its update to what is stored.
      const committed = await lock.commit({ $inc: { balance: 10 } });
      expect(committed.balance).toBe(11);
      expect((await Account.findById('a').orFail()).balance).toBe(11);
    });

    it('the holder commit lands only while held: not after a takeover, not after a Mongoose replaceOne', async () => {
      const first = await documents();
      const second = await documents();
      // A lease that ends, a Mongoose save meanwhile, then another holder.
      const stale = await first.acquire('a', { ttlMs: 1_000, renew: false });
      const account = await Account.findById('a').orFail();
      account.balance = 50;
      await account.save();
      await sleep(1_200);
      const current = await second.acquire('a');
      expect(current.doc.balance).toBe(50);
      await expect(stale.commit({ $inc: { balance: 1000 } })).rejects.toBeInstanceOf(LockLostError);
      expect((await Account.findById('a').orFail()).balance).toBe(50);
      await current.commit({ $inc: { balance: 1 } });
      expect((await Account.findById('a').orFail()).balance).toBe(51);

      // replaceOne (and findOneAndReplace) writes the whole document: the lock field is gone,
      // and the holder's commit is refused, writing nothing. __v starts again at 0.
      const held = await first.acquire('b');
      await Account.replaceOne({ _id: 'b' }, { _id: 'b', balance: 7 });
      expect(await raw.findOne({ _id: 'b' as any })).toEqual({
        _id: 'b',
        balance: 7,
        tags: [],
        __v: 0,
      });
      await expect(held.commit({ $inc: { balance: 1000 } })).rejects.toBeInstanceOf(LockLostError);
      expect(held.lost).toBe(true);
      expect((await Account.findById('b').orFail()).balance).toBe(7);
      const after = await second.acquire('b', { timeoutMs: 0 });
      await after.release();
    });

    it("updateIfCurrent on Mongoose's __v: applies at the loaded version, bumps it, reports conflicts", async () => {
      const docs = await documents({ field: '__v', type: 'int' });
      const loaded = await Account.findById('a').orFail();
      expect(loaded.__v).toBe(0);
      expect(await raw.countDocuments({ _id: 'a' as any, __v: { $type: 'int' } })).toBe(1);

      const updated = await docs.updateIfCurrent('a', loaded.__v, { $set: { balance: 50 } });
      expect(updated).toEqual({ _id: 'a', balance: 50, tags: [], __v: 1 });
      expect((await Account.findById('a').orFail()).__v).toBe(1);

      const stale = await docs
        .updateIfCurrent('a', loaded.__v, { $set: { balance: 0 } })
        .catch((e) => e);
      expect(stale).toBeInstanceOf(VersionConflictError);
      expect(stale).toMatchObject({ expected: 0, current: 1 });

      // Mongoose bumps __v itself when save() changes an array: a conflict for the old version.
      const fresh = await Account.findById('a').orFail();
      fresh.tags.push('x');
      await fresh.save();
      const conflict = await docs.updateIfCurrent('a', 1, { $set: { balance: 0 } }).catch((e) => e);
      expect(conflict).toBeInstanceOf(VersionConflictError);
      expect(conflict).toMatchObject({ expected: 1, current: 2 });

      // But a save() of scalar paths only does not touch __v (without optimisticConcurrency):
      // updateIfCurrent cannot see that write, and applies over it.
      fresh.balance = 7;
      await fresh.save();
      expect((await Account.findById('a').orFail()).__v).toBe(2);
      const over = await docs.updateIfCurrent('a', 2, { $inc: { balance: 1 } });
      expect(over).toMatchObject({ balance: 8, __v: 3 });

      // Commit under a lock bumps __v too; Mongoose reads the new version.
      const lock = await docs.acquire('a');
      const committed = await lock.commit({ $inc: { balance: 1 } });
      expect(committed.__v).toBe(4);
      expect((await Account.findById('a').orFail()).__v).toBe(4);
    });

    it('with optimisticConcurrency, Mongoose and the library see each other through __v', async () => {
      const Ledger = defineModel('ledgers', true);
      await Ledger.create({ _id: 'l', balance: 10 });
      const docs = (await kit.service()).documents(Ledger.collection.collectionName, {
        version: { field: '__v', type: 'int' },
      });
      // Mongoose's save() now checks and bumps __v on every save, scalar paths included.
      const first = await Ledger.findById('l').orFail();
      first.balance = 11;
      await first.save();
      expect((await Ledger.findById('l').orFail()).__v).toBe(1);
      await expect(docs.updateIfCurrent('l', 0, { $set: { balance: 0 } })).rejects.toBeInstanceOf(
        VersionConflictError,
      );

      // A Mongoose document loaded before a library commit cannot be saved over it.
      const loaded = await Ledger.findById('l').orFail();
      const lock = await docs.acquire('l');
      await lock.commit({ $inc: { balance: 5 } });
      loaded.balance = 0;
      await expect(loaded.save()).rejects.toBeInstanceOf(mongoose.Error.VersionError);
      expect(await Ledger.findById('l').lean().orFail()).toMatchObject({ balance: 16, __v: 2 });
      await docs.updateIfCurrent('l', 2, { $set: { balance: 17 } });
      expect(await Ledger.findById('l').lean().orFail()).toMatchObject({ balance: 17, __v: 3 });
    });
  });
});
