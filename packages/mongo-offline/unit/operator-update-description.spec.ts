import { describeOperatorUpdate } from '../engine/operator-update-description';

describe('describeOperatorUpdate', () => {
  it('reports a $set path whole, not as its subfields', () => {
    const before = { _id: 1, sub: { x: 1, y: 2 }, n: 1 };
    const after = { _id: 1, sub: { x: 1 }, n: 2 };
    expect(
      describeOperatorUpdate(before, after, { $set: { sub: { x: 1 } }, $inc: { n: 1 } }),
    ).toEqual({
      updatedFields: { sub: { x: 1 }, n: 2 },
      removedFields: [],
      truncatedArrays: [],
    });
  });

  it('reports $unset as removed, $push by element, a positional path inside its array', () => {
    const before = { a: 1, arr: [1, 2], docs: [{ v: 0 }, { v: 0 }] };
    const after = { arr: [1, 2, 3], docs: [{ v: 0 }, { v: 9 }] };
    expect(
      describeOperatorUpdate(before, after, {
        $unset: { a: '' },
        $push: { arr: 3 },
        $set: { 'docs.$[e].v': 9 },
      }),
    ).toEqual({
      updatedFields: { 'arr.2': 3, 'docs.1.v': 9 },
      removedFields: ['a'],
      truncatedArrays: [],
    });
  });

  it('leaves out paths whose value did not change', () => {
    expect(
      describeOperatorUpdate({ a: 1, b: 1 }, { a: 1, b: 2 }, { $set: { a: 1, b: 2 } })
        .updatedFields,
    ).toEqual({ b: 2 });
  });
});
