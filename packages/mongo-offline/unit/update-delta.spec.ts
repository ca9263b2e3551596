import { describePipelineUpdate } from '../engine/update-delta';

// Large enough that a few changed fields make a delta far smaller than the document.
const filler = 'x'.repeat(1_000);
const medium = 'm'.repeat(100);

describe('describePipelineUpdate (MongoDB v2 update deltas)', () => {
  it('reports changed, added and nested fields; a shrunk array smaller whole is updated whole', () => {
    const before = {
      _id: 1,
      n: 1,
      kept: filler,
      list: [filler, { a: medium }, 1, 2],
      short: [1, 2, 3, 4],
    };
    const after = { _id: 1, n: 2, kept: filler, list: [filler, { a: medium, b: 1 }], short: [1] };
    expect(describePipelineUpdate(before, { ...after, added: true })).toEqual({
      updatedFields: { n: 2, short: [1], added: true, 'list.1.b': 1 },
      removedFields: [],
      // `short`'s delta ({ a: true, l: 1 }) is larger than [1]: it goes whole, not truncated.
      truncatedArrays: [{ field: 'list', newSize: 2 }],
    });
  });

  it('removes trailing fields first, then the fields passed over, sorted', () => {
    const before = { _id: 1, z: 1, b: 2, kept: filler, tail: 3 };
    expect(describePipelineUpdate(before, { _id: 1, kept: filler })).toEqual({
      updatedFields: {},
      removedFields: ['tail', 'b', 'z'],
      truncatedArrays: [],
    });
  });

  it('reports a field that moved as set again, not removed', () => {
    const before = { _id: 1, a: 1, kept: filler };
    expect(describePipelineUpdate(before, { _id: 1, kept: filler, a: 1 })).toEqual({
      updatedFields: { a: 1 },
      removedFields: [],
      truncatedArrays: [],
    });
  });

  it('descends into documents and arrays of documents', () => {
    const before = {
      _id: 1,
      kept: filler,
      list: [{ x: 1, y: medium }, medium],
      nested: [[medium, 1, 2], medium],
      obj: { inner: { a: 1, b: 1, c: [medium, 1, 2], s: medium } },
    };
    const after = {
      _id: 1,
      kept: filler,
      list: [{ y: medium }, medium],
      nested: [[medium], medium],
      obj: { inner: { b: 2, c: [medium], s: medium } },
    };
    expect(describePipelineUpdate(before, after)).toEqual({
      updatedFields: { 'obj.inner.b': 2 },
      removedFields: ['list.0.x', 'obj.inner.a'],
      truncatedArrays: [
        { field: 'nested.0', newSize: 1 },
        { field: 'obj.inner.c', newSize: 1 },
      ],
    });
  });

  it('is logged whole (a replace event) when the delta plus 15 bytes is not smaller', () => {
    // { _id: 1, s: 'xxxxxx', a: 2 } is 35 bytes; its delta { u: { a: 2 } } 20, plus 15.
    const six = { _id: 1, s: 'x'.repeat(6), a: 1 };
    expect(describePipelineUpdate(six, { ...six, a: 2 })).toBeUndefined();
    // One byte longer, the same change is a delta.
    const seven = { _id: 1, s: 'x'.repeat(7), a: 1 };
    expect(describePipelineUpdate(seven, { ...seven, a: 2 })).toEqual({
      updatedFields: { a: 2 },
      removedFields: [],
      truncatedArrays: [],
    });
  });

  it('sets a nested array whole when its delta is not smaller than it', () => {
    // ['abc'] is 16 bytes, as its delta { a: true, l: 1 }: set whole.
    const short = { _id: 1, kept: filler, arr: ['abc', 'd'] };
    expect(describePipelineUpdate(short, { ...short, arr: ['abc'] })?.updatedFields).toEqual({
      arr: ['abc'],
    });
    // ['abcd'] is 17: truncated.
    const long = { _id: 1, kept: filler, arr: ['abcd', 'e'] };
    expect(describePipelineUpdate(long, { ...long, arr: ['abcd'] })).toEqual({
      updatedFields: {},
      removedFields: [],
      truncatedArrays: [{ field: 'arr', newSize: 1 }],
    });
  });
});
