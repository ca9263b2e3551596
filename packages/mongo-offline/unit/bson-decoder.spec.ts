import { inspect } from 'node:util';
import {
  BSON,
  BSONRegExp,
  BSONSymbol,
  Binary,
  Code,
  DBRef,
  Decimal128,
  type Document,
  Double,
  Int32,
  Long,
  MaxKey,
  MinKey,
  ObjectId,
  Timestamp,
  UUID,
} from 'bson';
import { DESERIALIZE_OPTIONS, decodeBson, decoderStats } from '../wire/bson-decoder';
import { factoryCompileCount } from '../wire/object-builder';
import { seededRandom } from './seeded-random';

/** What js-bson returns or throws, as text that shows classes, key order and values. */
function outcome(decode: () => Document): string {
  try {
    return inspect(decode(), { depth: null, showHidden: false, getters: false });
  } catch (error) {
    return `throws ${(error as Error).name}: ${(error as Error).message}`;
  }
}

function expectSameAsJsBson(bytes: Buffer): void {
  const expected = outcome(() => BSON.deserialize(bytes, DESERIALIZE_OPTIONS));
  // Twice: the second time key lists have factories and keys come from the key table.
  for (let i = 0; i < 2; i++) {
    expect(outcome(() => decodeBson(bytes))).toBe(expected);
  }
  if (!expected.startsWith('throws')) {
    expect(sameValue(decodeBson(bytes), BSON.deserialize(bytes, DESERIALIZE_OPTIONS))).toBe(true);
  }
}

/**
 * Same prototypes, own keys in the same order, same primitives (`Object.is`: -0, NaN) and
 * same bytes; jest's toStrictEqual cannot compare documents with a `constructor` key.
 */
function sameValue(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) {
    return Object.is(a, b);
  }
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (a instanceof Date) return Object.is(a.getTime(), (b as Date).getTime());
  if (a instanceof Uint8Array) return Buffer.compare(a, b as Uint8Array) === 0;
  const keys = Reflect.ownKeys(a);
  const otherKeys = Reflect.ownKeys(b);
  if (keys.length !== otherKeys.length) return false;
  return keys.every(
    (key, i) =>
      key === otherKeys[i] &&
      sameValue(
        (a as Record<string | symbol, unknown>)[key],
        (b as Record<string | symbol, unknown>)[key],
      ),
  );
}

const KEYS = [
  'a',
  '$cond',
  'input',
  '_id',
  '$ref',
  '$id',
  '$db',
  'é',
  '',
  'x.y',
  '0',
  'constructor',
  'a-much-longer-key-than-thirty-two-bytes',
];

function leaf(next: () => number): unknown {
  const leaves: Array<() => unknown> = [
    () => 'text',
    () => '$path',
    () => 'ünïcödé ✓',
    () => '',
    () => Math.floor(next() * 2 ** 31) * (next() < 0.5 ? -1 : 1),
    () => next() * 1e6,
    () => -0,
    () => Number.NaN,
    () => Long.fromNumber(2 ** 53),
    () => Long.fromNumber(-(2 ** 53)),
    () => Long.fromNumber(2 ** 53 - 1),
    () => Long.fromBits(0, 2 ** 21),
    () => Long.fromBits(1, -(2 ** 21) - 1),
    () => Long.fromString('9223372036854775807'),
    () => Long.fromInt(7),
    () => new Int32(5),
    () => new Double(3),
    () => true,
    () => false,
    () => null,
    () => undefined,
    () => new Date(Math.floor(next() * 2e12)),
    () => new Date(-1),
    () => new ObjectId(),
    () => new UUID(),
    () => new Binary(Buffer.from([1, 2, 3]), 4),
    () => new Binary(Buffer.from('bytes'), 0),
    () => new Binary(Buffer.from('old'), 2),
    () => new Binary(Buffer.alloc(0), 5),
    () => new Timestamp({ t: 1_700_000_000, i: 7 }),
    () => Decimal128.fromString('1.5'),
    () => /ab+c/i,
    () => new BSONRegExp('x', 'ms'),
    () => new Code('f()'),
    () => new Code('g()', { a: 1 }),
    () => new BSONSymbol('s'),
    () => new MinKey(),
    () => new MaxKey(),
    () => new DBRef('coll', new ObjectId()),
  ];
  return leaves[Math.floor(next() * leaves.length)]();
}

function value(next: () => number, depth: number): unknown {
  const roll = next();
  if (depth > 3 || roll < 0.5) return leaf(next);
  if (roll < 0.7)
    return Array.from({ length: Math.floor(next() * 4) }, () => value(next, depth + 1));
  return document(next, depth + 1);
}

function document(next: () => number, depth: number): Document {
  const result: Document = {};
  const count = Math.floor(next() * 5);
  for (let i = 0; i < count; i++) {
    result[KEYS[Math.floor(next() * KEYS.length)]] = value(next, depth);
  }
  return result;
}

describe('decodeBson', () => {
  it('decodes a lock command as js-bson does', () => {
    const free = {
      $or: [{ $eq: [{ $ifNull: ['$owner', null] }, null] }, { $lte: ['$expiresAt', '$$NOW'] }],
    };
    const command = {
      findAndModify: 'locks',
      query: { _id: 'key' },
      update: [{ $set: { owner: { $cond: [free, 'token', '$owner'] }, fence: Long.fromInt(3) } }],
      fields: { owner: 1, remainingMs: { $subtract: ['$expiresAt', '$$NOW'] } },
      upsert: true,
      lsid: { id: new UUID() },
      txnNumber: Long.fromInt(12),
      $clusterTime: {
        clusterTime: new Timestamp({ t: 1_700_000_000, i: 3 }),
        signature: { hash: new Binary(Buffer.alloc(20), 0), keyId: Long.fromInt(0) },
      },
      $db: 'test',
    };
    const bytes = Buffer.from(BSON.serialize(command));
    expectSameAsJsBson(bytes);
    // ...by itself: js-bson is only the fallback.
    const before = decoderStats.fallbacks;
    decodeBson(bytes);
    expect(decoderStats.fallbacks).toBe(before);
  });

  it('compares values strictly (the check the other tests rely on)', () => {
    expect(sameValue({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(false);
    expect(sameValue({ a: -0 }, { a: 0 })).toBe(false);
    expect(sameValue({ a: new Int32(1) }, { a: 1 })).toBe(false);
    expect(sameValue({ a: [1, { b: Number.NaN }] }, { a: [1, { b: Number.NaN }] })).toBe(true);
  });

  it('matches js-bson on 3000 random documents of every BSON type', () => {
    const next = seededRandom(1);
    for (let i = 0; i < 3000; i++) {
      expectSameAsJsBson(
        Buffer.from(BSON.serialize(document(next, 0), { ignoreUndefined: false })),
      );
    }
  });

  it('matches js-bson (value or error) on corrupted documents', () => {
    const next = seededRandom(2);
    for (let i = 0; i < 3000; i++) {
      const bytes = Buffer.from(BSON.serialize(document(next, 0), { ignoreUndefined: false }));
      const corrupt = Buffer.from(bytes);
      const changes = 1 + Math.floor(next() * 3);
      for (let c = 0; c < changes; c++) {
        corrupt[Math.floor(next() * corrupt.length)] = Math.floor(next() * 256);
      }
      expectSameAsJsBson(corrupt);
      expectSameAsJsBson(bytes.subarray(0, Math.floor(next() * bytes.length)));
    }
  });

  it('keeps repeated keys and __proto__ as js-bson does', () => {
    // {a: 1, a: 2, __proto__: {x: 1}} cannot be written from a JS object: built by hand.
    const element = (type: number, name: string, payload: Buffer) =>
      Buffer.concat([Buffer.from([type]), Buffer.from(`${name}\0`), payload]);
    const int32 = (n: number) => {
      const bytes = Buffer.alloc(4);
      bytes.writeInt32LE(n);
      return bytes;
    };
    const documentOf = (...elements: Buffer[]) => {
      const body = Buffer.concat([...elements, Buffer.from([0])]);
      return Buffer.concat([int32(body.length + 4), body]);
    };
    const proto = documentOf(element(0x10, 'x', int32(1)));
    const bytes = documentOf(
      element(0x10, 'a', int32(1)),
      element(0x10, 'a', int32(2)),
      element(0x03, '__proto__', proto),
      element(0x10, 'b', int32(3)),
    );
    expectSameAsJsBson(bytes);
    const decoded = decodeBson(bytes);
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
    expect(Object.keys(decoded)).toEqual(['a', '__proto__', 'b']);
  });

  it('compiles a repeated key list once, even beside another list of the same slot', () => {
    // Two key lists of the library's commands that share a slot of the factory table: each
    // evicted the other's compiled function, and every command compiled both again.
    const letOperator = Buffer.from(BSON.serialize({ $let: { vars: { a: 1 }, in: '$$a' } }));
    const reservation = Buffer.from(
      BSON.serialize({ w: { weight: 1, since: new Date(0), expiresAt: new Date(1), holder: 'h' } }),
    );
    const decodeEachTwice = () => {
      decodeBson(letOperator);
      decodeBson(letOperator);
      decodeBson(reservation);
      decodeBson(reservation);
    };
    decodeEachTwice();
    const compiledBefore = factoryCompileCount();
    for (let i = 0; i < 20; i++) decodeEachTwice();
    expect(factoryCompileCount()).toBe(compiledBefore);
    expectSameAsJsBson(letOperator);
    expectSameAsJsBson(reservation);
  });
});
