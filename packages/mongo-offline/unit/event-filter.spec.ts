import { type Document, ObjectId, Timestamp } from 'bson';
import { Query } from 'mingo/query';
import { compileEventFilter } from '../change-streams/event-filter';
import { MINGO_OPTIONS } from '../engine/mingo-options';
import { lockChangeStreams } from './lock-library';
import { seededRandom } from './seeded-random';

// Differential: wherever the compiled filter decides, it must decide as mingo's Query does.

const random = seededRandom(20261125);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];

const NAMES = ['operationType', 'lead', 'f', 'line', 'a', 'b'] as const;
const STRINGS = ['update', 'insert', 'replace', 'delete', 'h1 t1', 'line', ''];
const SCALARS: unknown[] = [
  ...STRINGS,
  true,
  false,
  null,
  0,
  1,
  1.5,
  new Date(0),
  new ObjectId('5f0c0c0c0c0c0c0c0c0c0c0c'),
  new Timestamp({ t: 1, i: 2 }),
];

function randomValue(depth: number): unknown {
  const roll = random();
  if (depth < 3 && roll < 0.3) return randomDocument(depth + 1);
  if (depth < 3 && roll < 0.4) {
    return Array.from({ length: Math.floor(random() * 3) }, () => randomValue(depth + 1));
  }
  return pick(SCALARS);
}

function randomDocument(depth: number): Document {
  const document: Document = {};
  for (const name of NAMES) if (random() < 0.4) document[name] = randomValue(depth);
  // Where the library's filters look, more often than chance would.
  if (depth === 0 && random() < 0.7) {
    document.updateDescription = { updatedFields: randomDocument(2) };
  }
  if (depth === 0 && random() < 0.3) document['dotted.key'] = pick(STRINGS);
  return document;
}

const PATHS = [
  'operationType',
  'lead',
  'a.b',
  'a.lead',
  'updateDescription.updatedFields.lead',
  'updateDescription.updatedFields.f',
  'updateDescription.updatedFields.line',
  'updateDescription.updatedFields.a.b',
  'dotted.key',
  'a.0',
];

function randomCondition(): unknown {
  switch (Math.floor(random() * 12)) {
    case 0:
      return pick(STRINGS);
    case 1:
      return pick([true, false]);
    case 2:
      return { $eq: pick([...STRINGS, true, false]) };
    case 3:
      return { $in: STRINGS.filter(() => random() < 0.4) };
    case 4:
      return { $exists: pick([true, false]) };
    case 5:
      return { $type: 'null' };
    case 6:
      return { $exists: true, $type: 'null' };
    // Left to mingo: numbers, null, documents, other operators.
    case 7:
      return pick([null, 1, 0]);
    case 8:
      return { $ne: pick(STRINGS) };
    case 9:
      return { $type: pick(['string', 10, 'array']) };
    case 10:
      return { b: 1 };
    default:
      return { $in: [pick(STRINGS), null] };
  }
}

function randomFilter(depth = 0): Document {
  const filter: Document = {};
  const fields = 1 + Math.floor(random() * 2);
  for (let i = 0; i < fields; i++) {
    const roll = random();
    if (depth < 2 && roll < 0.25) {
      const branches = Array.from({ length: 1 + Math.floor(random() * 3) }, () =>
        randomFilter(depth + 1),
      );
      filter[pick(['$or', '$and', '$nor'])] = branches;
    } else {
      filter[pick(PATHS)] = randomCondition();
    }
  }
  return filter;
}

const at = (ms: number) => new Date(Date.UTC(2026, 10, 22, 10) + ms);
const entry = (t: string, h: string) => ({ t, f: 1_700_000_000_005, e: at(30_000), h });
const update = (description: Document): Document => ({
  operationType: 'update',
  documentKey: { _id: 'k' },
  updateDescription: { updatedFields: {}, removedFields: [], truncatedArrays: [], ...description },
});

/** Change events of engine v2's writes (`line-pipelines.ts`, `document-line.ts`) and others'. */
const LOCK_EVENTS: Document[] = [
  // The lock collection: a first join, joins, a renewal, leaves, the line emptied or removed.
  {
    operationType: 'insert',
    documentKey: { _id: 'k' },
    fullDocument: { _id: 'k', f: 5, line: [entry('t1', 'h1')], gcAt: at(90_000) },
  },
  update({ updatedFields: { f: 6, 'line.1': entry('t2', 'h2'), gcAt: at(90_000) } }),
  update({ updatedFields: { f: 7, line: [entry('t3', 'h1')], gcAt: at(90_000) } }),
  update({ updatedFields: { 'line.0.e': at(30_000), gcAt: at(90_000) } }),
  update({
    updatedFields: { 'line.0': entry('t2', 'h2'), lead: 'h2 t2' },
    truncatedArrays: [{ field: 'line', newSize: 1 }],
  }),
  update({ updatedFields: { lead: '* t1' }, truncatedArrays: [{ field: 'line', newSize: 2 }] }),
  update({ updatedFields: { lead: 'h1 t3' } }),
  update({ updatedFields: { lead: null }, truncatedArrays: [{ field: 'line', newSize: 0 }] }),
  update({ updatedFields: { gcAt: at(90_000) }, truncatedArrays: [{ field: 'line', newSize: 0 }] }),
  update({ removedFields: ['line'] }),
  update({ updatedFields: { tx: 'x' } }),
  { operationType: 'delete', documentKey: { _id: 'k' } },
  { operationType: 'replace', documentKey: { _id: 'k' }, fullDocument: { _id: 'k' } },
  // Documents with a document lock in `lock`: names with a dot, the whole field, others' writes.
  update({ updatedFields: { 'lock.lead': 'h1 t3', 'lock.line.0': entry('t3', 'h1') } }),
  update({
    updatedFields: { 'lock.lead': '- t4' },
    truncatedArrays: [{ field: 'lock.line', newSize: 0 }],
  }),
  update({ updatedFields: { lock: { f: 5, line: [entry('t1', 'h1')], lead: null } } }),
  update({ updatedFields: { lock: null } }),
  update({ updatedFields: { lock: { owner: 'o1' } } }),
  update({ removedFields: ['lock.line'] }),
  update({ removedFields: ['lock'] }),
  update({ updatedFields: { name: 'x', version: 3 } }),
];

/** Whether a path of `filter`'s field conditions meets an array in `event`. */
function meetsArray(filter: Document, event: Document): boolean {
  return Object.entries(filter).some(([key, value]) => {
    if (key === '$or' || key === '$and') {
      return (value as Document[]).some((branch) => meetsArray(branch, event));
    }
    let current: unknown = event;
    for (const segment of key.split('.')) {
      if (Array.isArray(current)) return true;
      if (!current || typeof current !== 'object') return false;
      current = (current as Document)[segment];
    }
    return Array.isArray(current);
  });
}

describe('change stream filters compiled to JavaScript', () => {
  it('decide every event as mingo does, or leave it to mingo', () => {
    let compiled = 0;
    let decided = 0;
    let matched = 0;
    for (let f = 0; f < 400; f++) {
      const filter = randomFilter();
      const fast = compileEventFilter(filter);
      if (fast) compiled += 1;
      const query = new Query(filter, MINGO_OPTIONS);
      for (let e = 0; e < 60; e++) {
        const event = randomDocument(0);
        const expected = query.test(event);
        const result = fast?.(event);
        if (result === undefined) continue;
        decided += 1;
        if (result) matched += 1;
        if (result !== expected) {
          throw new Error(
            `filter ${JSON.stringify(filter)} on ${JSON.stringify(event)}: ${result}, mingo ${expected}`,
          );
        }
      }
    }
    // The generator reaches both sides: filters compiled and not, events matched and not.
    expect(compiled).toBeGreaterThan(100);
    expect(compiled).toBeLessThan(400);
    expect(matched).toBeGreaterThan(decided / 20);
    expect(decided - matched).toBeGreaterThan(decided / 20);
  });

  it("decides the conditions of the lock library's filters it compiles as mingo does", async () => {
    // Engine v2's four streams: waiters' (`$regex` on `lead`), `events$`'s, a document lock's.
    const streams = await lockChangeStreams('h1');
    expect(streams.map((stream) => stream.name)).toEqual([
      'watchLines',
      'watchLineEvents',
      'document watch',
      'document watchEvents',
    ]);
    // Each filter, and each branch of its `$or`. None is compiled as a whole (each has a
    // `$regex`, `$elemMatch`, `$expr` or `$type: 'object'`): mingo decides their events; the
    // conditions that are compiled must decide as it does.
    const conditions = streams.flatMap(({ pipeline }) => {
      const match = pipeline[0].$match as Document;
      return [match, ...((match.$or as Document[] | undefined) ?? [])];
    });
    let compiled = 0;
    let decided = 0;
    for (const condition of conditions) {
      const fast = compileEventFilter(condition);
      if (!fast) continue;
      compiled += 1;
      const query = new Query(condition, MINGO_OPTIONS);
      for (const event of LOCK_EVENTS) {
        const result = fast(event);
        if (result === undefined) {
          // Undecided only where one of its paths meets an array (MongoDB's array traversal).
          if (!meetsArray(condition, event)) {
            throw new Error(`${JSON.stringify(condition)} left ${JSON.stringify(event)} undecided`);
          }
          continue;
        }
        decided += 1;
        if (result !== query.test(event)) {
          throw new Error(
            `${JSON.stringify(condition)} on ${JSON.stringify(event)}: ${result}, mingo ${!result}`,
          );
        }
      }
    }
    // The operation types, and `$exists` / `$type: 'null'` / `$in` on the changed fields.
    expect(compiled).toBeGreaterThanOrEqual(10);
    expect(decided).toBeGreaterThan((compiled * LOCK_EVENTS.length) / 2);
  });

  it('leaves a path through an array to mingo', () => {
    const fast = compileEventFilter({ 'a.b': 'x' })!;
    expect(fast({ a: [{ b: 'x' }] })).toBeUndefined();
    expect(fast({ a: { b: ['x'] } })).toBeUndefined();
    expect(fast({ a: { b: 'x' } })).toBe(true);
  });

  it('leaves $or and $and to mingo when a branch it needs is undecided', () => {
    const event = { a: [{ b: 'x' }], c: 'y' };
    expect(compileEventFilter({ $or: [{ 'a.b': 'x' }, { c: 'z' }] })!(event)).toBeUndefined();
    expect(compileEventFilter({ $or: [{ 'a.b': 'x' }, { c: 'y' }] })!(event)).toBe(true);
    expect(compileEventFilter({ $and: [{ 'a.b': 'x' }, { c: 'y' }] })!(event)).toBeUndefined();
    expect(compileEventFilter({ $and: [{ 'a.b': 'x' }, { c: 'z' }] })!(event)).toBe(false);
  });
});
