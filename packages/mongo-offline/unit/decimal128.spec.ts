import { Decimal128, type Document, Long } from 'bson';
import { useOfflineMongo } from '../tests/with-offline-mongo';

// Decimal128 over the wire with the official driver: MongoDB adds, subtracts, multiplies and
// compares it with the other numeric types, exactly (decimal arithmetic, not binary floating
// point), and any decimal operand makes the result a decimal.

const dec = (value: string): Decimal128 => Decimal128.fromString(value);

/** The stored value's BSON type and text, e.g. `Decimal128 2` or `number 3`. */
function described(value: unknown): string {
  if (value && typeof value === 'object' && '_bsontype' in value) {
    return `${String(value._bsontype)} ${(value as { toString(): string }).toString()}`;
  }
  return `${typeof value} ${String(value)}`;
}

describe('offline mongo: Decimal128', () => {
  const harness = useOfflineMongo();
  let counter = 0;
  const collection = () =>
    harness()
      .client.db('decimal128')
      .collection<any>(`c${(counter += 1)}`);

  /** Stores `{_id: 1, v}`, applies the update and returns the stored `v`, described. */
  async function updated(v: unknown, update: Document | Document[]): Promise<string> {
    const items = collection();
    await items.insertOne({ _id: 1, v });
    const result = await items.updateOne({ _id: 1 }, update);
    expect(result.matchedCount).toBe(1);
    return described((await items.findOne({ _id: 1 }))?.v);
  }

  describe('$inc', () => {
    it('adds a decimal to a decimal', async () => {
      expect(await updated(dec('1'), { $inc: { v: dec('1') } })).toBe('Decimal128 2');
      expect(await updated(dec('2.50'), { $inc: { v: dec('-0.25') } })).toBe('Decimal128 2.25');
    });

    it('adds an int or a long to a decimal (it is not left unchanged)', async () => {
      expect(await updated(dec('1.5'), { $inc: { v: 2 } })).toBe('Decimal128 3.5');
      expect(await updated(dec('10'), { $inc: { v: Long.fromNumber(-3) } })).toBe('Decimal128 7');
    });

    it('adds a double to a decimal as MongoDB converts it (15 significant digits)', async () => {
      expect(await updated(dec('1'), { $inc: { v: 0.5 } })).toBe('Decimal128 1.500000000000000');
    });

    it('adds a decimal to an int, giving a decimal', async () => {
      expect(await updated(5, { $inc: { v: dec('0.5') } })).toBe('Decimal128 5.5');
    });

    it('sets a missing field to the decimal amount', async () => {
      const items = collection();
      await items.insertOne({ _id: 1 });
      await items.updateOne({ _id: 1 }, { $inc: { 'sub.v': dec('4.2') } });
      expect(described((await items.findOne({ _id: 1 }))?.sub?.v)).toBe('Decimal128 4.2');
    });

    it('is exact: 0.1 + 0.2 = 0.3', async () => {
      expect(await updated(dec('0.1'), { $inc: { v: dec('0.2') } })).toBe('Decimal128 0.3');
    });

    it('refuses a non-numeric field with MongoDB’s TypeMismatch', async () => {
      const items = collection();
      await items.insertOne({ _id: 1, v: 'text' });
      await expect(items.updateOne({ _id: 1 }, { $inc: { v: dec('1') } })).rejects.toMatchObject({
        code: 14,
        errmsg:
          "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'v' of non-numeric type string",
      });
    });
  });

  describe('$mul, $min, $max', () => {
    it('multiplies decimals with decimals and numbers', async () => {
      expect(await updated(dec('1.5'), { $mul: { v: dec('2.0') } })).toBe('Decimal128 3.00');
      expect(await updated(dec('1.25'), { $mul: { v: 4 } })).toBe('Decimal128 5.00');
      expect(await updated(3, { $mul: { v: dec('0.1') } })).toBe('Decimal128 0.3');
    });

    it('compares decimals with numbers', async () => {
      expect(await updated(dec('2.5'), { $max: { v: 3 } })).toBe('number 3');
      expect(await updated(dec('2.5'), { $max: { v: 2 } })).toBe('Decimal128 2.5');
      expect(await updated(10, { $min: { v: dec('9.99') } })).toBe('Decimal128 9.99');
    });
  });

  describe('update pipelines', () => {
    it('$add, $subtract and $multiply give decimals', async () => {
      expect(await updated(dec('1'), [{ $set: { v: { $add: ['$v', dec('1')] } } }])).toBe(
        'Decimal128 2',
      );
      expect(await updated(dec('1.5'), [{ $set: { v: { $add: ['$v', 1, 2] } } }])).toBe(
        'Decimal128 4.5',
      );
      expect(await updated(7, [{ $set: { v: { $subtract: ['$v', dec('0.5')] } } }])).toBe(
        'Decimal128 6.5',
      );
      expect(await updated(dec('1.1'), [{ $set: { v: { $multiply: ['$v', 3] } } }])).toBe(
        'Decimal128 3.3',
      );
    });

    it('are exact: 0.1 + 0.2 = 0.3 and 0.3 - 0.1 = 0.2', async () => {
      expect(await updated(dec('0.1'), [{ $set: { v: { $add: ['$v', dec('0.2')] } } }])).toBe(
        'Decimal128 0.3',
      );
      expect(await updated(dec('0.3'), [{ $set: { v: { $subtract: ['$v', dec('0.1')] } } }])).toBe(
        'Decimal128 0.2',
      );
    });

    it('compare decimals with numbers in $cond, $max and $min', async () => {
      const pipeline = [
        {
          $set: {
            gt: { $gt: ['$v', 2] },
            eq: { $eq: ['$v', 2.5] },
            lt: { $lt: [2, '$v'] },
            max: { $max: ['$v', 3] },
            min: { $min: ['$v', 3] },
            capped: { $cond: [{ $gte: ['$v', dec('2.50')] }, 'yes', 'no'] },
          },
        },
      ];
      const items = collection();
      await items.insertOne({ _id: 1, v: dec('2.5') });
      await items.updateOne({ _id: 1 }, pipeline);
      const stored = await items.findOne({ _id: 1 });
      expect(stored).toMatchObject({ gt: true, eq: true, lt: true, max: 3, capped: 'yes' });
      expect(described(stored?.min)).toBe('Decimal128 2.5');
    });
  });

  describe('queries', () => {
    async function seeded() {
      const items = collection();
      await items.insertMany([
        { _id: 1, v: dec('3') },
        { _id: 2, v: 3 },
        { _id: 3, v: dec('3.00') },
        { _id: 4, v: dec('10') },
        { _id: 5, v: 2.5 },
        { _id: 6, v: dec('-1') },
      ]);
      return items;
    }
    const ids = async (cursor: { toArray(): Promise<Document[]> }) =>
      (await cursor.toArray()).map((document) => document._id as number).sort((a, b) => a - b);

    it('match equal values whatever their numeric type', async () => {
      const items = await seeded();
      expect(await ids(items.find({ v: dec('3') }))).toEqual([1, 2, 3]);
      expect(await ids(items.find({ v: 3 }))).toEqual([1, 2, 3]);
      expect(await ids(items.find({ v: { $in: [dec('10'), 2.5] } }))).toEqual([4, 5]);
      expect(await ids(items.find({ v: { $ne: 3 } }))).toEqual([4, 5, 6]);
    });

    it('order decimals by value, not by text, against numbers and decimals', async () => {
      const items = await seeded();
      expect(await ids(items.find({ v: { $gt: dec('2.9') } }))).toEqual([1, 2, 3, 4]);
      expect(await ids(items.find({ v: { $gt: 3 } }))).toEqual([4]);
      expect(await ids(items.find({ v: { $lt: dec('9') } }))).toEqual([1, 2, 3, 5, 6]);
      expect(await ids(items.find({ v: { $gte: 2.5, $lte: dec('3') } }))).toEqual([1, 2, 3, 5]);
    });

    it('compare decimals in $expr and in aggregation projections', async () => {
      const items = await seeded();
      expect(await ids(items.find({ $expr: { $gt: ['$v', 5] } }))).toEqual([4]);
      const sums = await items
        .aggregate([
          { $match: { _id: { $in: [1, 4] } } },
          { $project: { total: { $add: ['$v', 0.5, dec('0.25')] } } },
          { $sort: { _id: 1 } },
        ])
        .toArray();
      expect(sums.map((document) => described(document.total))).toEqual([
        'Decimal128 3.750000000000000',
        'Decimal128 10.750000000000000',
      ]);
    });

    it('projections with compiled expressions give decimals', async () => {
      const items = await seeded();
      const found = await items.findOne(
        { _id: 4 },
        { projection: { plus: { $add: ['$v', 1] }, big: { $gt: ['$v', 9] } } },
      );
      expect(described(found?.plus)).toBe('Decimal128 11');
      expect(found?.big).toBe(true);
    });
  });

  it("names the type 'decimal' in $type and matches it with $type in filters", async () => {
    const items = collection();
    await items.insertOne({ _id: 1, v: dec('1.5'), n: 1 });
    const found = await items.findOne(
      { _id: 1 },
      { projection: { v: { $type: '$v' }, n: { $type: '$n' }, none: { $type: '$missing' } } },
    );
    expect(found).toEqual({ _id: 1, v: 'decimal', n: 'int', none: 'missing' });
    expect(await items.countDocuments({ v: { $type: 'decimal' } })).toBe(1);
    expect(
      await items.countDocuments({ $expr: { $in: [{ $type: '$v' }, ['decimal', 'int']] } }),
    ).toBe(1);
  });
});
