import { describeUpdate } from '../engine/update-description';

describe('describeUpdate', () => {
  it('reports nested changes by dotted path and removed fields', () => {
    expect(
      describeUpdate(
        { _id: 1, a: { x: 1, y: 2 }, gone: 1 },
        { _id: 1, a: { x: 5, y: 2 }, added: true },
      ),
    ).toEqual({
      updatedFields: { 'a.x': 5, added: true },
      removedFields: ['gone'],
      truncatedArrays: [],
    });
  });

  it('reports appended and changed array elements and truncation', () => {
    expect(describeUpdate({ arr: [1, 2, 3] }, { arr: [1, 9, 3, 4] }).updatedFields).toEqual({
      'arr.1': 9,
      'arr.3': 4,
    });
    expect(describeUpdate({ arr: [1, 2, 3] }, { arr: [1] })).toEqual({
      updatedFields: {},
      removedFields: [],
      truncatedArrays: [{ field: 'arr', newSize: 1 }],
    });
  });

  it('reports a value whose type changed even when it compares equal', () => {
    expect(describeUpdate({ a: null }, { a: 0 }).updatedFields).toEqual({ a: 0 });
  });
});
