import { compare as mingoCompare } from 'mingo/util';
import { compareStrings, compareValues } from '../engine/value-order';
import { seededRandom } from './seeded-random';

const byBytes = (a: string, b: string): number =>
  Math.sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));

describe('value order (strings by code point, as MongoDB)', () => {
  it('orders strings by their UTF-8 bytes', () => {
    // Characters around the ranges where UTF-16 and code point order part.
    const alphabet = ['a', '~', '\u00e9', '\uD7FF', '\uE000', '\uFFFF', '😀', '𝒳', '\u{10FFFF}'];
    const random = seededRandom(7);
    const word = (): string =>
      Array.from(
        { length: Math.floor(random() * 4) },
        () => alphabet[Math.floor(random() * alphabet.length)],
      ).join('');
    for (let i = 0; i < 5000; i++) {
      const a = word();
      const b = word();
      expect([a, b, compareStrings(a, b)]).toEqual([a, b, byBytes(a, b)]);
    }
    expect(compareStrings('k:😀', 'k:\uE000')).toBe(1);
    expect(compareStrings('k:\uFFFF', 'k:𝒳')).toBe(-1);
    expect(compareStrings('k:', 'k:😀')).toBe(-1);
  });

  it('orders strings inside arrays and documents the same way', () => {
    expect(compareValues({ k: '😀' }, { k: '\uE000' })).toBe(1);
    expect(compareValues(['😀'], ['\uE000'])).toBe(1);
    expect(compareValues(['😀', 'a'], '\uE000')).toBe(-1);
    expect(compareValues(['😀'], '\uE000')).toBe(1);
  });

  it('keeps mingo order for everything without such strings', () => {
    const date = new Date(0);
    const values: unknown[] = [
      undefined,
      null,
      -1,
      0,
      2.5,
      NaN,
      'a',
      'b',
      '',
      { a: 1 },
      { a: 1, b: 2 },
      { b: 'x' },
      [],
      [1, 2],
      [3],
      ['a', 1],
      true,
      false,
      date,
      new Date(1),
      /a/,
      /a/i,
    ];
    for (const a of values) {
      for (const b of values) {
        expect([a, b, compareValues(a, b)]).toEqual([a, b, mingoCompare(a, b)]);
      }
    }
  });
});
