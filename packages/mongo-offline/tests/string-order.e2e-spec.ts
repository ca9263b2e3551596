import { useOfflineMongo } from './with-offline-mongo';

/**
 * Strings without a collation compare as MongoDB compares them: by their UTF-8 bytes, which is
 * Unicode code point order. JavaScript's `<` compares UTF-16 code units instead, which puts a
 * character above U+FFFF (a surrogate pair, D800-DFFF) before one in U+E000..U+FFFF.
 */
describe('offline mongo: string order is code point order', () => {
  const harness = useOfflineMongo();
  const collection = (name: string) => harness().client.db('stringOrder').collection<any>(name);

  // 'k:😀' is U+1F600 and 'k:𝒳' U+1D4B3: above every BMP character, though as UTF-16 they
  // start with a surrogate (0xD83D, 0xD835) below U+E000 and U+FFFF.
  const KEYS = ['k:😀', 'k:~', 'k:\uFFFF', 'k:a', 'k:𝒳', 'k:\uE000', 'k:\u00e9', 'k:\uD7FF'];

  /** The reference order, from first principles: the strings' UTF-8 bytes. */
  const byBytes = (a: string, b: string): number =>
    Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
  const ascending = [...KEYS].sort(byBytes);
  const descending = [...ascending].reverse();

  it('has a reference order that differs from UTF-16 order', () => {
    expect(ascending).toEqual([
      'k:a',
      'k:~',
      'k:\u00e9',
      'k:\uD7FF',
      'k:\uE000',
      'k:\uFFFF',
      'k:𝒳',
      'k:😀',
    ]);
    expect([...KEYS].sort()).not.toEqual(ascending);
  });

  it('sorts find results, range queries, $sort, $max and $min in code point order', async () => {
    const keys = collection('keys');
    await keys.insertMany(KEYS.map((key) => ({ _id: key, name: key, nested: { key } })));
    const ids = (documents: Array<{ _id?: unknown }>) => documents.map((document) => document._id);

    expect(ids(await keys.find().sort({ _id: 1 }).toArray())).toEqual(ascending);
    expect(ids(await keys.find().sort({ _id: -1 }).toArray())).toEqual(descending);
    expect(ids(await keys.find().sort({ 'nested.key': 1 }).toArray())).toEqual(ascending);
    expect(ids(await keys.find({}, { sort: { name: -1 }, limit: 3 }).toArray())).toEqual(
      descending.slice(0, 3),
    );

    // Range scans, as a lock listing keys by prefix page by page.
    const above = (key: string) => ascending.filter((other) => byBytes(other, key) > 0);
    const below = (key: string) => ascending.filter((other) => byBytes(other, key) < 0);
    for (const key of ['k:\uE000', 'k:😀', 'k:\uFFFF', 'k:~']) {
      expect(
        ids(
          await keys
            .find({ _id: { $gt: key } })
            .sort({ _id: 1 })
            .toArray(),
        ),
      ).toEqual(above(key));
      expect(
        ids(
          await keys
            .find({ _id: { $lt: key } })
            .sort({ _id: 1 })
            .toArray(),
        ),
      ).toEqual(below(key));
      expect(
        ids(
          await keys
            .find({ name: { $gte: key, $lte: 'k:\uFFFF' } })
            .sort({ _id: 1 })
            .toArray(),
        ),
      ).toEqual(
        ascending.filter((other) => byBytes(other, key) >= 0 && byBytes(other, 'k:\uFFFF') <= 0),
      );
    }
    expect(await keys.countDocuments({ _id: { $gt: 'k:\uFFFF' } })).toBe(2);

    // Aggregation: the $sort stage, $max / $min as accumulators and expressions, $cmp, $gt.
    expect(ids(await keys.aggregate([{ $sort: { name: 1 } }]).toArray())).toEqual(ascending);
    expect(ids(await keys.aggregate([{ $sort: { name: -1 } }]).toArray())).toEqual(descending);
    expect(
      await keys
        .aggregate([{ $group: { _id: null, max: { $max: '$name' }, min: { $min: '$name' } } }])
        .toArray(),
    ).toEqual([{ _id: null, max: 'k:😀', min: 'k:a' }]);
    const [computed] = await keys
      .aggregate([
        { $match: { _id: 'k:\uE000' } },
        {
          $project: {
            _id: 0,
            max: { $max: ['$name', 'k:😀', 'k:\uFFFF'] },
            min: { $min: ['k:😀', 'k:\uFFFF'] },
            cmp: { $cmp: ['k:😀', '$name'] },
            gt: { $gt: ['k:😀', '$name'] },
            lt: { $lt: ['k:😀', '$name'] },
            sorted: { $sortArray: { input: KEYS, sortBy: 1 } },
            byField: {
              $sortArray: { input: KEYS.map((key) => ({ key })), sortBy: { key: -1 } },
            },
          },
        },
      ])
      .toArray();
    expect(computed).toEqual({
      max: 'k:😀',
      min: 'k:\uFFFF',
      cmp: 1,
      gt: true,
      lt: false,
      sorted: ascending,
      byField: descending.map((key) => ({ key })),
    });
    expect(
      ids(
        await keys
          .find({ $expr: { $gt: ['$name', 'k:\uFFFF'] } })
          .sort({ _id: 1 })
          .toArray(),
      ),
    ).toEqual(['k:𝒳', 'k:😀']);
  });

  it('compares in code point order in update pipelines', async () => {
    const flags = collection('flags');
    await flags.insertMany(KEYS.map((key) => ({ _id: key })));
    await flags.updateMany({}, [
      { $set: { above: { $gt: ['$_id', 'k:\uFFFF'] }, top: { $max: ['$_id', 'k:\uE000'] } } },
    ]);
    const found = await flags.find({ above: true }).sort({ _id: 1 }).toArray();
    expect(found.map((document) => document._id)).toEqual(['k:𝒳', 'k:😀']);
    expect(await flags.findOne({ _id: 'k:😀' })).toEqual({ _id: 'k:😀', above: true, top: 'k:😀' });
    expect(await flags.findOne({ _id: 'k:\uFFFF' })).toMatchObject({ top: 'k:\uFFFF' });
  });

  it('applies $max / $min updates in code point order', async () => {
    const values = collection('values');
    await values.insertOne({ _id: 1, max: 'k:\uE000', min: 'k:😀' });
    await values.updateOne({ _id: 1 }, { $max: { max: 'k:😀' }, $min: { min: 'k:\uE000' } });
    expect(await values.findOne({ _id: 1 })).toEqual({ _id: 1, max: 'k:😀', min: 'k:\uE000' });
    await values.updateOne({ _id: 1 }, { $max: { max: 'k:\uFFFF' }, $min: { min: 'k:𝒳' } });
    expect(await values.findOne({ _id: 1 })).toEqual({ _id: 1, max: 'k:😀', min: 'k:\uE000' });
  });
});
