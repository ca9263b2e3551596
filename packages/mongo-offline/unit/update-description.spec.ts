import { Decimal128, Int32, Long, ObjectId, Timestamp } from 'bson';
import { canonicalKey } from '../engine/bson-values';
import { same } from '../engine/update-description';

describe('same', () => {
  it('compares values as their canonical keys do, without building them', () => {
    const scalars: unknown[] = [
      undefined,
      null,
      0,
      -0,
      1,
      1.5,
      NaN,
      '',
      '1',
      'a,b',
      true,
      false,
      new Date(0),
      new Date(NaN),
      new Date(5),
      /x/i,
      1n,
      Long.fromNumber(1),
      new Int32(1),
      Decimal128.fromString('1'),
      new ObjectId('5f0c0c0c0c0c0c0c0c0c0c0c'),
      new Timestamp({ t: 1, i: 1 }),
    ];
    const values: unknown[] = [...scalars];
    for (const x of scalars) {
      values.push([x], [x, 1], { k: x }, { k: x, v: 1 }, { v: 1, k: x }, { k: [x, { y: x }] });
    }
    values.push([], {}, [[]], [{}], { k: undefined }, { j: 1 });
    let compared = 0;
    for (const a of values) {
      for (const b of values) {
        const typeOf = (v: unknown) =>
          v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
        const expected = canonicalKey(a) === canonicalKey(b) && typeOf(a) === typeOf(b);
        if (same(a, b) !== expected) throw new Error(`same(${String(a)}, ${String(b)})`);
        compared += 1;
      }
    }
    expect(compared).toBe(values.length ** 2);
  });
});
