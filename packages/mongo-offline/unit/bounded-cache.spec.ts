import { type ShapeTokens, ShapeCache } from '../engine/bounded-cache';

const shape = (hash: number, ...tokens: Array<number | string>): ShapeTokens => ({ hash, tokens });

describe('ShapeCache', () => {
  it('evicts the least recently used entry past capacity', () => {
    const cache = new ShapeCache<number>(2);
    cache.getOrCreate(shape(1, 'a'), () => 1);
    cache.getOrCreate(shape(2, 'b'), () => 2);
    expect(cache.getOrCreate(shape(1, 'a'), () => -1)).toBe(1); // a is now more recent than b
    cache.getOrCreate(shape(3, 'c'), () => 3);
    expect(cache.size).toBe(2);
    expect(cache.has(shape(1, 'a'))).toBe(true);
    expect(cache.has(shape(2, 'b'))).toBe(false);
    expect(cache.has(shape(3, 'c'))).toBe(true);
    expect(cache.hits).toBe(1);
    expect(cache.misses).toBe(3);
  });

  it('keeps shapes whose hashes collide apart, comparing every token', () => {
    const cache = new ShapeCache<string>(8);
    expect(cache.getOrCreate(shape(7, -1, 'x'), () => 'first')).toBe('first');
    expect(cache.getOrCreate(shape(7, -1, 'y'), () => 'second')).toBe('second');
    expect(cache.getOrCreate(shape(7, -1, 'x', -1), () => 'third')).toBe('third');
    expect(cache.getOrCreate(shape(7, -1, 'x'), () => 'again')).toBe('first');
    expect(cache.size).toBe(3);
  });

  it('does not keep a reference to the caller’s token array', () => {
    const cache = new ShapeCache<number>(2);
    const tokens: Array<number | string> = [1, 'a'];
    cache.getOrCreate({ hash: 5, tokens }, () => 1);
    tokens[1] = 'b';
    expect(cache.has(shape(5, 1, 'a'))).toBe(true);
    expect(cache.has(shape(5, 1, 'b'))).toBe(false);
  });

  it('computes but never stores sequences over the length limit', () => {
    const cache = new ShapeCache<number>(4, 3);
    let created = 0;
    for (let i = 0; i < 3; i++) cache.getOrCreate(shape(9, 1, 2, 3, 4), () => ++created);
    expect(created).toBe(3);
    expect(cache.size).toBe(0);
  });
});
