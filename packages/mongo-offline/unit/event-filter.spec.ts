import { type Document, ObjectId, Timestamp } from 'bson';
import { Query } from 'mingo/query';
import {
  LOCK_OWNERSHIP_PIPELINE,
  lockReleasePipeline,
} from '../../../lib/store/lock-change-stream';
import { compileEventFilter } from '../change-streams/event-filter';
import { MINGO_OPTIONS } from '../engine/mingo-options';
import { seededRandom } from './seeded-random';

// Differential: wherever the compiled filter decides, it must decide as mingo's Query does.

const random = seededRandom(20261125);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];

const NAMES = ['operationType', 'owner', 'frees', 'grantee', 'a', 'b'] as const;
const STRINGS = ['update', 'insert', 'replace', 'delete', 'g1', 'x', ''];
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
  'owner',
  'a.b',
  'a.owner',
  'updateDescription.updatedFields.owner',
  'updateDescription.updatedFields.frees',
  'updateDescription.updatedFields.grantee',
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

  it("compiles the lock library's filters and decides its events without mingo", () => {
    const filters = [
      lockReleasePipeline()[0].$match,
      lockReleasePipeline('g1')[0].$match,
      LOCK_OWNERSHIP_PIPELINE[0].$match,
    ];
    const events: Document[] = [
      { operationType: 'insert', fullDocument: { _id: 'k', owner: 'o' } },
      { operationType: 'delete', documentKey: { _id: 'k' } },
      { operationType: 'update', updateDescription: { updatedFields: { owner: null } } },
      { operationType: 'update', updateDescription: { updatedFields: { owner: 'o2' } } },
      { operationType: 'update', updateDescription: { updatedFields: { grantee: 'g1' } } },
      { operationType: 'update', updateDescription: { updatedFields: { expiresAt: new Date() } } },
      { operationType: 'update', updateDescription: { updatedFields: { frees: 3 } } },
      { operationType: 'update', updateDescription: { updatedFields: { fence: 9 } } },
      { operationType: 'update', updateDescription: { updatedFields: { 'holders.x.v': 1 } } },
    ];
    for (const filter of filters) {
      const fast = compileEventFilter(filter);
      expect(fast).toBeDefined();
      const query = new Query(filter, MINGO_OPTIONS);
      for (const event of events) expect(fast!(event)).toBe(query.test(event));
    }
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
