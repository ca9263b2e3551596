import { Decimal128, Long, ObjectId } from 'bson';
import { canonicalKey } from '../engine/bson-values';

describe('canonicalKey (index and _id equality)', () => {
  it('equates numbers of different BSON types by value', () => {
    expect(canonicalKey(1)).toBe(canonicalKey(Long.fromNumber(1)));
    expect(canonicalKey(1)).toBe(canonicalKey(Decimal128.fromString('1')));
    expect(canonicalKey(0)).toBe(canonicalKey(-0));
  });

  it('distinguishes values MongoDB distinguishes', () => {
    const id = new ObjectId();
    expect(canonicalKey(id)).toBe(canonicalKey(new ObjectId(id.toHexString())));
    expect(canonicalKey('1')).not.toBe(canonicalKey(1));
    expect(canonicalKey(null)).not.toBe(canonicalKey(false));
    expect(canonicalKey({ a: 1, b: 2 })).not.toBe(canonicalKey({ b: 2, a: 1 }));
    expect(canonicalKey(new Date(5))).not.toBe(canonicalKey(5));
  });
});
