import { Binary, Double, Int32, Long, ObjectId, Timestamp } from 'bson';
import { findMismatches } from './match';

const entities = {
  entityValue: (name: string) => ({ saved: { id: 7 } })[name as 'saved'],
  sessionLsid: (name: string) =>
    name === 'session0' ? { id: new Binary(Buffer.from('abcd'), 4) } : undefined,
};

const matches = (expected: unknown, actual: unknown, root = false) =>
  findMismatches(expected, actual, { root, entities });

describe('unified format matching', () => {
  it('allows extra fields only in a root-level document', () => {
    expect(matches({ x: 1 }, { x: 1, y: 1 }, true)).toEqual([]);
    expect(matches({ x: 1 }, { x: 1, y: 1 }, false)).toHaveLength(1);
    expect(matches({ x: { y: 1 } }, { x: { y: 1, z: 1 } }, true)).toEqual([
      '$.x.z is not expected in a nested document',
    ]);
    expect(matches({ x: 1, y: 1 }, { x: 1 }, true)).toHaveLength(1);
  });

  it('ignores key order and fields whose value is undefined', () => {
    expect(matches({ x: 1, y: 2 }, { y: 2, x: 1 })).toEqual([]);
    expect(matches({ x: 1 }, { x: 1, comment: undefined })).toEqual([]);
  });

  it('compares numbers by value across int32, int64 and double', () => {
    expect(matches(1, 1.0)).toEqual([]);
    expect(matches(1, new Long(1))).toEqual([]);
    expect(matches(1, new Int32(1))).toEqual([]);
    expect(matches(1, 1.5)).toHaveLength(1);
    expect(matches(1, '1')).toHaveLength(1);
    expect(matches(1, new Timestamp({ t: 0, i: 1 }))).toHaveLength(1);
  });

  it('requires arrays of the same length, elements not root-level', () => {
    expect(matches([1, 2, 3], [1, 2, 3, 4])).toHaveLength(1);
    expect(matches([{ x: 1 }], [{ x: 1, y: 2 }], true)).toHaveLength(1);
    expect(matches([], [])).toEqual([]);
  });

  it('implements $$exists in both directions', () => {
    expect(matches({ a: { $$exists: true } }, { a: null })).toEqual([]);
    expect(matches({ a: { $$exists: true } }, {})).toHaveLength(1);
    expect(matches({ a: { $$exists: false } }, {})).toEqual([]);
    expect(matches({ a: { $$exists: false } }, { a: 1 })).toHaveLength(1);
  });

  it('implements $$type with single and several names', () => {
    expect(matches({ $$type: ['int', 'long'] }, new Long(5))).toEqual([]);
    expect(matches({ $$type: ['int', 'long'] }, 5)).toEqual([]);
    expect(matches({ $$type: 'objectId' }, new ObjectId())).toEqual([]);
    expect(matches({ $$type: 'array' }, [1])).toEqual([]);
    expect(matches({ $$type: 'string' }, 5)).toHaveLength(1);
    expect(matches({ a: { $$type: 'string' } }, {})).toHaveLength(1);
    expect(matches({ $$type: 'object' }, { a: 1 })).toEqual([]);
    expect(matches({ $$type: 'long' }, new Timestamp({ t: 1, i: 1 }))).toHaveLength(1);
    expect(matches({ $$type: 'int' }, 1.5)).toHaveLength(1);
  });

  it('implements $$unsetOrMatches, keeping the root-level rule of its position', () => {
    expect(matches({ a: { $$unsetOrMatches: 2 } }, {})).toEqual([]);
    expect(matches({ a: { $$unsetOrMatches: 2 } }, { a: 3 })).toHaveLength(1);
    expect(matches({ $$unsetOrMatches: { x: 1 } }, { x: 1, y: 2 }, true)).toEqual([]);
    expect(matches({ $$unsetOrMatches: { x: 1 } }, undefined, true)).toEqual([]);
    expect(matches({ a: { $$unsetOrMatches: { x: 1 } } }, { a: { x: 1, y: 2 } })).toHaveLength(1);
  });

  it('implements $$sessionLsid, $$matchesEntity and $$lte', () => {
    const lsid = { id: new Binary(Buffer.from('abcd'), 4) };
    expect(matches({ lsid: { $$sessionLsid: 'session0' } }, { lsid })).toEqual([]);
    const other = { id: new Binary(Buffer.from('abce'), 4) };
    expect(matches({ lsid: { $$sessionLsid: 'session0' } }, { lsid: other })).toHaveLength(1);
    expect(matches({ $$matchesEntity: 'saved' }, { id: 7 })).toEqual([]);
    expect(matches({ $$lte: 5 }, 5.0)).toEqual([]);
    expect(matches({ $$lte: 5 }, 6)).toHaveLength(1);
  });

  it('implements $$matchAsDocument and $$matchAsRoot', () => {
    expect(matches({ $$matchAsDocument: { a: 1 } }, '{"a": 1}')).toEqual([]);
    expect(matches({ $$matchAsDocument: { a: 1 } }, '{"a": 1, "b": 2}')).toHaveLength(1);
    expect(matches({ $$matchAsDocument: { $$matchAsRoot: { a: 1 } } }, '{"a":1,"b":2}')).toEqual(
      [],
    );
    expect(matches({ x: { $$matchAsRoot: { a: 1 } } }, { x: { a: 1, b: 2 } })).toEqual([]);
  });

  it('rejects an unknown special operator loudly', () => {
    expect(() => matches({ $$nope: 1 }, 1)).toThrow('Unsupported special operator');
  });

  it('compares BSON values by type and value', () => {
    const id = new ObjectId();
    expect(matches(id, new ObjectId(id.toHexString()))).toEqual([]);
    expect(matches(id, new ObjectId())).toHaveLength(1);
    expect(matches(null, null)).toEqual([]);
    expect(matches(null, 0)).toHaveLength(1);
    expect(matches(new Date(5), new Date(5))).toEqual([]);
  });
});

describe('arrays of root-level documents', () => {
  it('allows extra fields in each element but not extra elements', () => {
    const options = { rootElements: true };
    expect(findMismatches([{ x: 1 }], [{ x: 1, y: 2 }], options)).toEqual([]);
    expect(findMismatches([{ x: 1 }], [{ x: 1 }, { x: 2 }], options)).toHaveLength(1);
    expect(findMismatches([{ x: { a: 1 } }], [{ x: { a: 1, b: 2 } }], options)).toHaveLength(1);
  });
});

describe('ordered documents', () => {
  it('matches a Map (the driver keeps sort specifications as Maps) as a document', () => {
    expect(findMismatches({ sort: { _id: 1 } }, { sort: new Map([['_id', 1]]) })).toEqual([]);
  });
});

describe('exact number types (collection contents)', () => {
  it('tells int32, int64 and double apart when asked', () => {
    const exact = { exactNumberTypes: true };
    expect(findMismatches({ x: 1 }, { x: new Int32(1) }, exact)).toEqual([]);
    expect(findMismatches({ x: 1 }, { x: new Double(1) }, exact)).toHaveLength(1);
    expect(findMismatches({ x: 1 }, { x: new Long(1) }, exact)).toHaveLength(1);
    expect(findMismatches({ x: 1.5 }, { x: new Double(1.5) }, exact)).toEqual([]);
    expect(findMismatches({ x: 1 }, { x: new Double(1) })).toEqual([]);
  });
});
