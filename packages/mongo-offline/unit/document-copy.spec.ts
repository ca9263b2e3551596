import { BSON, Binary, Decimal128, Long, ObjectId, Timestamp } from 'bson';
import type { Document } from 'bson';
import { cloneDocument, sameDocument } from '../engine/bson-values';
import { decodeBson } from '../wire/bson-decoder';
import { seededRandom } from './seeded-random';

// cloneDocument and sameDocument decide plain documents without BSON: each must give exactly
// what the BSON round trip (or the byte comparison) gives, on plain documents and on others.

/** The definition: serialize, then decode as the server does. */
function roundTrip(document: Document): Document {
  const bytes = BSON.serialize(document);
  return decodeBson(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}

function sameBytes(a: Document, b: Document): boolean {
  return Buffer.from(BSON.serialize(a)).equals(BSON.serialize(b));
}

/** What a call returns, or the message it throws. */
function outcome<T>(run: () => T): { value: T } | { error: string } {
  try {
    return { value: run() };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

/** Seeded draws, so that a failure can be replayed (`SEED=<n>` tries other documents). */
function generator(seed: number) {
  const next = seededRandom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)];
  return { next, pick };
}

const PLAIN_LEAVES: readonly (() => unknown)[] = [
  () => 0,
  () => -0,
  () => 1,
  () => 1.5,
  () => NaN,
  () => Infinity,
  () => 2 ** 31,
  () => -(2 ** 31),
  () => 2 ** 53 + 2,
  () => '',
  () => 'grant:r1',
  () => 'ü€𝄞',
  () => 'lone \uD800 surrogate',
  () => true,
  () => false,
  () => null,
  () => new Date(1_700_000_000_000),
  () => new Date(0),
];

const OTHER_LEAVES: readonly (() => unknown)[] = [
  () => undefined,
  () => Long.fromString('9223372036854775807'),
  () => new ObjectId('65a000000000000000000001'),
  () => new Timestamp({ t: 5, i: 1 }),
  () => new Binary(Buffer.from('ab')),
  () => Decimal128.fromString('1.5'),
  () => /lock/i,
  () => new Date(NaN),
];

const KEYS = ['a', 'b', 'owner', 'fence', '1', '0', '$ref', '$id', 'x.y', 'expiresAt'];

function randomValue(
  random: ReturnType<typeof generator>,
  depth: number,
  plainOnly: boolean,
): unknown {
  const roll = random.next();
  if (depth < 3 && roll < 0.2) return randomDocument(random, depth + 1, plainOnly);
  if (depth < 3 && roll < 0.3) {
    const length = Math.floor(random.next() * 4);
    return Array.from({ length }, () => randomValue(random, depth + 1, plainOnly));
  }
  if (!plainOnly && roll > 0.9) return random.pick(OTHER_LEAVES)();
  return random.pick(PLAIN_LEAVES)();
}

function randomDocument(
  random: ReturnType<typeof generator>,
  depth: number,
  plainOnly: boolean,
): Document {
  const document: Document = {};
  const size = Math.floor(random.next() * 5);
  for (let i = 0; i < size; i++) {
    const key = plainOnly ? random.pick(KEYS.filter((k) => !k.startsWith('$'))) : random.pick(KEYS);
    document[key] = randomValue(random, depth, plainOnly);
  }
  return document;
}

/** A variant of `document`: the same, or changed in one small way (a value, a key's place). */
function variant(random: ReturnType<typeof generator>, document: Document): Document {
  const copy: Document = { ...document };
  const keys = Object.keys(copy);
  const roll = random.next();
  if (keys.length === 0 || roll < 0.25) return copy;
  const key = random.pick(keys);
  if (roll < 0.5) copy[key] = randomValue(random, 2, false);
  else if (roll < 0.65) {
    const value: unknown = copy[key];
    delete copy[key];
    copy[key] = value; // same fields, another order
  } else if (roll < 0.8) copy.extra = undefined;
  else if (roll < 0.9) copy[key] = typeof copy[key] === 'number' ? -copy[key] : copy[key];
  else copy[key] = Array.isArray(copy[key]) ? [...(copy[key] as unknown[]), undefined] : copy[key];
  return copy;
}

describe('cloneDocument', () => {
  it('gives what the BSON round trip gives, for plain documents and any others', () => {
    const random = generator(Number(process.env.SEED ?? 20261124));
    for (let i = 0; i < 3_000; i++) {
      const document = randomDocument(random, 0, i % 2 === 0);
      const expected = outcome(() => roundTrip(document));
      const actual = outcome(() => cloneDocument(document));
      expect(actual).toEqual(expected);
      if ('value' in actual && 'value' in expected) {
        expect(sameBytes({ d: actual.value }, { d: expected.value })).toBe(true);
      }
    }
  });

  it('copies a lock document without sharing anything with it', () => {
    const lock = {
      _id: 'orders:1',
      owner: 'grant:r1:42',
      fence: 42,
      expiresAt: new Date(1_700_000_005_000),
      waiting: { r1: { weight: 1000, since: new Date(1_700_000_000_000), holder: 'h' } },
      holders: [] as number[],
      gone: undefined,
      missing: [undefined, 1],
    };
    const copy = cloneDocument(lock);
    expect(copy).toEqual(roundTrip(lock));
    expect(Object.keys(copy)).not.toContain('gone');
    expect(copy.missing).toEqual([null, 1]);
    copy.waiting.r1.since.setTime(0);
    copy.waiting.r1.weight = 1;
    copy.holders.push(1);
    expect(lock.waiting.r1).toEqual({
      weight: 1000,
      since: new Date(1_700_000_000_000),
      holder: 'h',
    });
    expect(lock.holders).toEqual([]);
  });
});

describe('sameDocument', () => {
  it('answers as comparing the BSON bytes would, for plain documents and any others', () => {
    const random = generator(Number(process.env.SEED ?? 424242));
    let same = 0;
    for (let i = 0; i < 3_000; i++) {
      const document = randomDocument(random, 0, i % 3 !== 0);
      const other = variant(random, document);
      const expected = outcome(() => sameBytes(document, other));
      expect(outcome(() => sameDocument(document, other))).toEqual(expected);
      if ('value' in expected && expected.value) same += 1;
    }
    // Both answers were exercised.
    expect(same).toBeGreaterThan(300);
    expect(same).toBeLessThan(2_700);
  });

  it('tells the number types BSON tells apart', () => {
    expect(sameDocument({ n: 0 }, { n: -0 })).toBe(false);
    expect(sameDocument({ n: NaN }, { n: NaN })).toBe(true);
    expect(sameDocument({ n: NaN }, { n: -NaN })).toBe(false);
    expect(sameDocument({ n: 1 }, { n: 1.0 })).toBe(true);
    expect(sameDocument({ n: 1 }, { n: Long.fromNumber(1) })).toBe(false);
    expect(sameDocument({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(false);
    expect(sameDocument({ a: 1, b: undefined }, { a: 1 })).toBe(true);
  });

  it('sees strings as UTF-8 does: a lone surrogate is U+FFFD, in values and in keys', () => {
    expect(sameDocument({ s: 'a\uD800' }, { s: 'a\uFFFD' })).toBe(true);
    expect(cloneDocument({ s: 'a\uD800' }).s).toBe('a\uFFFD');
    expect(sameDocument({ s: 'a😀' }, { s: 'a\uFFFD' })).toBe(false);
    expect(sameDocument({ 'k\uD800': 1 }, { 'k\uFFFD': 1 })).toBe(true);
    expect(Object.keys(cloneDocument({ 'k\uD800': 1 }))).toEqual(['k\uFFFD']);
  });

  it('leaves to BSON what BSON drops, refuses or serializes its own way', () => {
    const withFunction = { x: 1, f: () => 1, y: 2 };
    expect(sameDocument(withFunction, { x: 1, y: 2 })).toBe(
      sameBytes(withFunction, { x: 1, y: 2 }),
    );
    expect(sameDocument({ x: 1 }, { x: 1, f: () => 1 })).toBe(true);
    // A difference first, then something BSON refuses: BSON's error, not `false`.
    expect(() => sameDocument({ x: 1, 'k\0': 1 }, { x: 2, 'k\0': 1 })).toThrow();
    const cyclic: Document = { x: 1 };
    cyclic.self = cyclic;
    expect(() => sameDocument({ x: 0, c: cyclic }, { x: 1, c: cyclic })).toThrow();
    expect(() => cloneDocument(cyclic)).toThrow();
    const hidden = { a: 1 };
    Object.defineProperty(hidden, 'toBSON', { value: () => ({ b: 2 }), enumerable: false });
    expect(cloneDocument({ h: hidden })).toEqual(roundTrip({ h: hidden }));
    let deep: Document = { leaf: 1 };
    for (let i = 0; i < 150; i++) deep = { d: deep };
    expect(cloneDocument(deep)).toEqual(roundTrip(deep));
  });
});
