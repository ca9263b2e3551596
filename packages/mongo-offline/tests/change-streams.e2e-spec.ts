import { forceReleaseLine } from '../../../lib/store/line/line-admin';
import {
  type JoinRequest,
  type LineCollection,
  joinLine,
  leaveLine,
  renewInLine,
} from '../../../lib/store/line/line-commands';
import { lineEvents } from '../../../lib/store/line/line-state';
import { filterStats } from '../change-streams/change-stream-cursor';
import { lockChangeStreams } from '../unit/lock-library';
import { openStream, useOfflineMongo } from './with-offline-mongo';

/** An exclusive join of engine v2, waiting in line if need be. */
const join = (token: string, holderId: string, ttlMs = 30_000): JoinRequest => ({
  key: 'k',
  token,
  holderId,
  ttlMs,
  kind: { mode: 'exclusive' },
  onlyIfHolds: false,
  idleRetentionMs: 60_000,
});

describe('offline mongo: change streams', () => {
  const harness = useOfflineMongo();
  const client = () => harness().client;
  const db = () => client().db('streams');

  it('reports insert, update, replace and delete with their documented fields', async () => {
    const items = db().collection<any>('events');
    const stream = items.watch<any, any>([], { fullDocument: 'updateLookup' });
    const { next: first } = await openStream(client(), stream);
    await items.insertOne({ _id: 1, a: 1, arr: [1, 2, 3], sub: { x: 1, y: 2 } });
    await items.updateOne(
      { _id: 1 },
      { $set: { 'sub.x': 5 }, $unset: { a: '' }, $push: { arr: 4 } as any },
    );
    await items.replaceOne({ _id: 1 }, { b: 2 });
    await items.deleteOne({ _id: 1 });
    const insert = await first;
    expect(insert).toMatchObject({
      operationType: 'insert',
      ns: { db: 'streams', coll: 'events' },
      documentKey: { _id: 1 },
      fullDocument: { _id: 1, a: 1 },
    });
    expect(insert.clusterTime).toBeDefined();
    expect(insert.wallTime).toBeInstanceOf(Date);
    const update = await stream.next();
    expect(update.operationType).toBe('update');
    expect(update.updateDescription).toEqual({
      updatedFields: { 'sub.x': 5, 'arr.3': 4 },
      removedFields: ['a'],
      truncatedArrays: [],
    });
    expect(update.fullDocument).toBeNull(); // looked up after the later delete
    expect(await stream.next()).toMatchObject({
      operationType: 'replace',
      fullDocument: { _id: 1, b: 2 },
    });
    expect(await stream.next()).toMatchObject({ operationType: 'delete', documentKey: { _id: 1 } });
    await stream.close();
  });

  it('reports array truncation', async () => {
    const items = db().collection<any>('truncation');
    await items.insertOne({ _id: 1, array: ['foo', { a: 'bar' }, 1, 2, 3] });
    const stream = items.watch<any, any>();
    const { next: first } = await openStream(client(), stream);
    await items.updateOne({ _id: 1 }, [{ $set: { array: ['foo', { a: 'bar' }] } }]);
    expect((await first).updateDescription).toEqual({
      updatedFields: {},
      removedFields: [],
      truncatedArrays: [{ field: 'array', newSize: 2 }],
    });
    await stream.close();
  });

  it('streams a pipeline update as replace when MongoDB would log it whole', async () => {
    const items = db().collection<any>('whole');
    await items.insertMany([
      { _id: 'short', a: 1 },
      { _id: 'long', a: 1, s: 'x'.repeat(100) },
    ]);
    const stream = items.watch<any, any>();
    const { next: first } = await openStream(client(), stream);
    // The delta of `a` (20 bytes, plus 15 of the oplog entry) outweighs the 27-byte document.
    await items.updateOne({ _id: 'short' }, [{ $set: { a: 2 } }]);
    await items.updateOne({ _id: 'long' }, [{ $set: { a: 2 } }]);
    await items.updateOne({ _id: 'short' }, { $set: { a: 3 } }); // an operator update: a delta
    expect(await first).toMatchObject({ operationType: 'replace', fullDocument: { a: 2 } });
    expect(await stream.next()).toMatchObject({
      operationType: 'update',
      updateDescription: { updatedFields: { a: 2 } },
    });
    expect(await stream.next()).toMatchObject({
      operationType: 'update',
      updateDescription: { updatedFields: { a: 3 } },
    });
    await stream.close();
  });

  it('wakes a waiting getMore as soon as a write happens', async () => {
    const items = db().collection<any>('wake');
    // Without the wake-up the getMore would wait 60 s, far beyond this test's timeout.
    const stream = items.watch<any, any>([], { maxAwaitTimeMS: 60_000 });
    const { next: first } = await openStream(client(), stream);
    await items.insertOne({ _id: 'w' });
    expect(await first).toMatchObject({ operationType: 'insert', documentKey: { _id: 'w' } });
    await stream.close();
  }, 10_000);

  it('resumes by itself after a resumable getMore failure (failGetMoreAfterCursorCheckout)', async () => {
    const items = db().collection<any>('resumable');
    const stream = items.watch<any, any>();
    const { next: first } = await openStream(client(), stream);
    await client()
      .db('admin')
      .command({
        configureFailPoint: 'failGetMoreAfterCursorCheckout',
        mode: { times: 1 },
        data: { errorCode: 43 },
      });
    await items.insertOne({ _id: 'after-failure' });
    expect((await first).documentKey).toEqual({ _id: 'after-failure' });
    await stream.close();
  });

  it('reports create, createIndexes and dropIndexes with showExpandedEvents only', async () => {
    const database = client().db('expanded');
    const stream = database.watch<any, any>([], { showExpandedEvents: true });
    const { next: first } = await openStream(client(), stream);
    await database.createCollection('made');
    await database.collection('made').createIndex({ a: 1 });
    await database.collection('made').dropIndex('a_1');
    await database
      .collection<any>('made')
      .updateOne({ _id: 1 }, { $set: { a: 1 } }, { upsert: true });
    await database.collection<any>('made').updateOne({ _id: 1 }, { $set: { a: 2 } });
    expect(await first).toMatchObject({
      operationType: 'create',
      ns: { db: 'expanded', coll: 'made' },
    });
    expect(await stream.next()).toMatchObject({
      operationType: 'createIndexes',
      operationDescription: { indexes: [{ key: { a: 1 }, name: 'a_1' }] },
    });
    expect((await stream.next()).operationType).toBe('dropIndexes');
    expect((await stream.next()).operationType).toBe('insert');
    expect((await stream.next()).updateDescription).toEqual({
      updatedFields: { a: 2 },
      removedFields: [],
      truncatedArrays: [],
      disambiguatedPaths: {},
    });
    await stream.close();
  });

  it('serves pre- and post-images only where changeStreamPreAndPostImages is enabled', async () => {
    const database = db();
    await database.createCollection('withImages', {
      changeStreamPreAndPostImages: { enabled: true },
    });
    const stream = database.watch<any, any>([], {
      fullDocument: 'whenAvailable',
      fullDocumentBeforeChange: 'whenAvailable',
    });
    const { next: first } = await openStream(client(), stream);
    await database.collection<any>('withImages').insertOne({ _id: 1, v: 1 });
    await database.collection<any>('withImages').updateOne({ _id: 1 }, { $set: { v: 2 } });
    await database.collection<any>('withoutImages').insertOne({ _id: 1, v: 1 });
    await database.collection<any>('withoutImages').updateOne({ _id: 1 }, { $set: { v: 2 } });
    expect((await first).operationType).toBe('insert');
    expect(await stream.next()).toMatchObject({
      fullDocument: { _id: 1, v: 2 },
      fullDocumentBeforeChange: { _id: 1, v: 1 },
    });
    expect((await stream.next()).operationType).toBe('insert');
    expect(await stream.next()).toMatchObject({
      fullDocument: null,
      fullDocumentBeforeChange: null,
    });
    await stream.close();
  });

  it('does not emit an event for a no-op update', async () => {
    const items = db().collection<any>('noop');
    await items.insertOne({ _id: 1, a: 1 });
    const stream = items.watch<any, any>();
    const { next: first } = await openStream(client(), stream);
    await items.updateOne({ _id: 1 }, { $set: { a: 1 } });
    await items.updateOne({ _id: 1 }, { $set: { a: 2 } });
    expect((await first).updateDescription.updatedFields).toEqual({ a: 2 });
    await stream.close();
  });

  it('applies user stages after $changeStream', async () => {
    const items = db().collection<any>('filtered');
    const stream = items.watch<any, any>([
      { $match: { 'fullDocument.keep': true } },
      { $project: { operationType: 1, 'fullDocument.keep': 1 } },
    ]);
    const { next: first } = await openStream(client(), stream);
    await items.insertMany([{ keep: false }, { keep: true }]);
    const event = await first;
    expect(event.fullDocument).toEqual({ keep: true });
    expect(Object.keys(event).sort()).toEqual(['_id', 'fullDocument', 'operationType']);
    await stream.close();
  });

  it("delivers to each process the leaves that name it, by the lock library's `$regex` on `lead`", async () => {
    const locks = db().collection<any>('v2-lines') as unknown as LineCollection;
    // The streams engine v2's waiters open, for h1, h2 and h (whose id is a prefix of both),
    // each open before the next (`openStream` waits for the client's next getMore).
    const streams = [];
    for (const holderId of ['h1', 'h2', 'h']) {
      const [{ pipeline, options }] = await lockChangeStreams(holderId);
      const stream = locks.watch<any, any>(pipeline, options);
      streams.push({ stream, ...(await openStream(client(), stream)) });
    }
    const [h1, h2, h] = streams;
    await joinLine(locks, join('t1', 'h1')); // an insert: nobody
    await joinLine(locks, join('t2', 'h2')); // a waiter joins: nobody
    await renewInLine(locks, 'k', 't2', 30_000, 60_000); // a renewal: nobody
    await leaveLine(locks, 'k', 't1'); // t2 now leads: h2
    await joinLine(locks, join('t3', 'h1'));
    await leaveLine(locks, 'k', 't2'); // t3 now leads: h1
    await forceReleaseLine(locks, 'k', 60_000); // everyone: an operator's lead
    // An update's delta, or (a write MongoDB logs whole, as a force release of a short line
    // document) a replacement's document.
    const lead = (event: any): unknown =>
      event.operationType === 'replace'
        ? event.fullDocument.lead
        : event.updateDescription.updatedFields.lead;
    const everyone = /^! [\w-]+$/;
    expect(lead(await h2.next)).toBe('h2 t2');
    expect(lead(await h2.stream.next())).toMatch(everyone);
    expect(lead(await h1.next)).toBe('h1 t3');
    expect(lead(await h1.stream.next())).toMatch(everyone);
    expect(lead(await h.next)).toMatch(everyone);
    // The document looked up (`updateLookup`, as the library asks): the line left empty.
    expect((await h.next).fullDocument).toMatchObject({ _id: 'k', line: [] });
    await Promise.all(streams.map(({ stream }) => stream.close()));
  });

  it("delivers the changes the lock library's `events$` filter selects, renewals left out", async () => {
    const locks = db().collection<any>('v2-events') as unknown as LineCollection;
    const [, { pipeline, options }] = await lockChangeStreams('h1');
    const stream = locks.watch<any, any>(pipeline, options);
    const { next: first } = await openStream(client(), stream);
    await joinLine(locks, join('t1', 'h1'));
    await joinLine(locks, join('t2', 'h2'));
    await renewInLine(locks, 'k', 't2', 30_000, 60_000);
    await leaveLine(locks, 'k', 't1');
    await leaveLine(locks, 'k', 't2');
    // An entry whose lease ends, then a renewal that finds it ended: the line emptied, with
    // `lead` unchanged.
    await joinLine(locks, join('t4', 'h1', 1));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await renewInLine(locks, 'k', 't4', 30_000, 60_000)).toEqual({ renewed: false });
    const summary = (event: any) => {
      const updated = event.updateDescription?.updatedFields ?? {};
      return [event.operationType, ...['f', 'lead'].filter((field) => field in updated)];
    };
    const events = [await first];
    for (let i = 0; i < 5; i++) events.push(await stream.next());
    expect(events.map(summary)).toEqual([
      ['insert'],
      ['update', 'f'],
      ['update', 'lead'],
      ['update', 'lead'],
      ['update', 'f'],
      ['update'],
    ]);
    expect(events[2].updateDescription.updatedFields.lead).toBe('h2 t2');
    expect(events[3].updateDescription.updatedFields.lead).toBeNull();
    // The last, by its delta alone: a release.
    expect(lineEvents(events[5]).map((event) => event.type)).toEqual(['released']);
    await stream.close();
  });

  it('leaves a path through an array to mingo', async () => {
    const items = db().collection<any>('filter-arrays');
    const arrays = items.watch<any, any>([{ $match: { 'fullDocument.tags.name': 'x' } }]);
    const { next: tagged } = await openStream(client(), arrays);
    const before = filterStats.byQuery;
    await items.insertMany([{ tags: [{ name: 'y' }] }, { tags: [{ name: 'x' }] }]);
    expect((await tagged).fullDocument.tags).toEqual([{ name: 'x' }]);
    expect(filterStats.byQuery).toBe(before + 2);
    await arrays.close();
  });

  it('fails with ChangeStreamFatalError when the pipeline removes _id', async () => {
    const items = db().collection<any>('brokenId');
    const stream = items.watch<any, any>([{ $project: { _id: 0 } }]);
    const { next: first } = await openStream(client(), stream);
    await items.insertOne({ z: 1 });
    await expect(first).rejects.toMatchObject({
      code: 280,
      errorLabelSet: new Set(['NonResumableChangeStreamError']),
    });
    await stream.close();
  });

  it('rejects an unknown stage with 40324', async () => {
    const stream = db()
      .collection('x')
      .watch<any, any>([{ $unsupported: 'foo' }]);
    await expect(stream.next()).rejects.toMatchObject({ code: 40324 });
    await stream.close();
  });

  it('resumes after a token and starts at an operation time (inclusive)', async () => {
    const items = db().collection<any>('resume');
    const stream = items.watch<any, any>();
    const { next: first } = await openStream(client(), stream);
    await items.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
    const event = await first;
    await stream.close();
    const resumed = items.watch<any, any>([], { resumeAfter: event._id });
    expect((await resumed.next()).documentKey).toEqual({ _id: 2 });
    expect((await resumed.next()).documentKey).toEqual({ _id: 3 });
    await resumed.close();
    const fromTime = items.watch<any, any>([], { startAtOperationTime: event.clusterTime });
    expect((await fromTime.next()).documentKey).toEqual({ _id: 1 });
    await fromTime.close();
  });

  it('hands out resume tokens that sort by cluster time, with a postBatchResumeToken', async () => {
    const items = db().collection<any>('tokens');
    const stream = items.watch<any, any>();
    const { next: first } = await openStream(client(), stream);
    await items.insertOne({ _id: 1 });
    await items.insertOne({ _id: 2 });
    const a = await first;
    const b = await stream.next();
    expect(a.clusterTime.compare(b.clusterTime)).toBeLessThan(0);
    expect(String(a._id._data) < String(b._id._data)).toBe(true);
    // After a drained batch the driver keeps the postBatchResumeToken: at or after b.
    expect(String((stream.resumeToken as any)._data) >= String(b._id._data)).toBe(true);
    await stream.close();
  });

  it('closes a collection stream with invalidate on drop; startAfter resumes after it', async () => {
    const items = db().collection<any>('dropped');
    await items.insertOne({ _id: 0 });
    const stream = items.watch<any, any>();
    const { next: first } = await openStream(client(), stream);
    await items.drop();
    expect((await first).operationType).toBe('drop');
    const invalidate = await stream.next();
    expect(invalidate.operationType).toBe('invalidate');
    await stream.close();
    const after = items.watch<any, any>([], { startAfter: invalidate._id });
    const { next: again } = await openStream(client(), after);
    await items.insertOne({ _id: 'again' });
    expect((await again).documentKey).toEqual({ _id: 'again' });
    await after.close();
    const refused = items.watch<any, any>([], { resumeAfter: invalidate._id });
    await expect(refused.next()).rejects.toMatchObject({ code: 260 });
    await refused.close();
  });

  it('reports rename with its target, then invalidate', async () => {
    const source = db().collection<any>('renameFrom');
    await source.insertOne({ _id: 1 });
    const stream = source.watch<any, any>();
    const { next: first } = await openStream(client(), stream);
    await source.rename('renameTo');
    expect(await first).toMatchObject({
      operationType: 'rename',
      ns: { db: 'streams', coll: 'renameFrom' },
      to: { db: 'streams', coll: 'renameTo' },
    });
    expect((await stream.next()).operationType).toBe('invalidate');
    await stream.close();
  });

  it('watches a database and the whole cluster', async () => {
    const dbStream = client().db('watchedDb').watch<any, any>();
    const clusterStream = client().watch<any, any>();
    const { next: dbFirst } = await openStream(client(), dbStream);
    const { next: clusterFirst } = await openStream(client(), clusterStream);
    await client().db('otherDb').collection<any>('x').insertOne({ _id: 'other' });
    await client().db('watchedDb').collection<any>('y').insertOne({ _id: 'mine' });
    expect((await dbFirst).documentKey).toEqual({ _id: 'mine' });
    expect((await clusterFirst).documentKey).toEqual({ _id: 'other' });
    expect((await clusterStream.next()).ns).toEqual({ db: 'watchedDb', coll: 'y' });
    await client().db('watchedDb').dropDatabase();
    expect((await dbStream.next()).operationType).toBe('drop');
    expect((await dbStream.next()).operationType).toBe('dropDatabase');
    expect((await dbStream.next()).operationType).toBe('invalidate');
    await dbStream.close();
    await clusterStream.close();
  });
});

describe('offline mongo: change streams on a standalone', () => {
  const harness = useOfflineMongo({ replicaSet: false });

  it('fails with 40573 like a standalone mongod', async () => {
    const stream = harness().client.db('s').collection('c').watch<any, any>();
    await expect(stream.next()).rejects.toMatchObject({ code: 40573 });
    await stream.close();
  });
});
