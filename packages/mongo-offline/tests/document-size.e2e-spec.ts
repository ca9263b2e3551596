// MongoDB refuses to store a document over 16 MB (maxBsonObjectSize) and writes nothing: an
// update's result fails with 17419 (a findAndModify's as a command error, an update
// statement's as a write error), an upsert's with 17420.
import { MongoServerError } from 'mongodb';
import { useOfflineMongo } from './with-offline-mongo';

const nineMegabytes = 'y'.repeat(9 * 1024 * 1024);
const RESULT_TOO_LARGE = 'Resulting document after update is larger than 16777216';

describe('offline mongo: documents over the BSON size limit', () => {
  const harness = useOfflineMongo();
  const collection = (name: string) => harness().client.db('sizes').collection<any>(name);

  it('findAndModify whose result would exceed 16 MB fails with 17419 and writes nothing', async () => {
    const docs = collection('findAndModify');
    await docs.insertOne({ _id: 1, first: nineMegabytes, n: 0 });
    for (const update of [
      { $set: { second: nineMegabytes }, $inc: { n: 1 } },
      [{ $set: { second: nineMegabytes, n: 1 } }],
    ]) {
      const error = await docs
        .findOneAndUpdate({ _id: 1 }, update, { returnDocument: 'after' })
        .catch((e) => e);
      expect(error).toBeInstanceOf(MongoServerError);
      expect(error).toMatchObject({ code: 17419, message: RESULT_TOO_LARGE });
      expect(await docs.findOne({ _id: 1 }, { projection: { first: 0 } })).toEqual({
        _id: 1,
        n: 0,
      });
    }
  });

  it('an update statement whose result would exceed 16 MB is a write error (17419)', async () => {
    const docs = collection('update');
    await docs.insertOne({ _id: 1, first: nineMegabytes, n: 0 });
    const reply = await harness()
      .client.db('sizes')
      .command({
        update: 'update',
        updates: [{ q: { _id: 1 }, u: { $set: { second: nineMegabytes } } }],
      });
    expect(reply).toMatchObject({ n: 0, nModified: 0 });
    expect(reply.writeErrors).toEqual([{ index: 0, code: 17419, errmsg: RESULT_TOO_LARGE }]);
    expect(await docs.findOne({ _id: 1 }, { projection: { first: 0 } })).toEqual({ _id: 1, n: 0 });
    // Up to the limit is fine.
    await docs.updateOne({ _id: 1 }, { $set: { second: 'z'.repeat(1024) } });
    expect((await docs.findOne({ _id: 1 }))?.second).toHaveLength(1024);
  });

  it('an upsert whose new document would exceed 16 MB fails with 17420 and inserts nothing', async () => {
    const docs = collection('upsert');
    // The pipeline doubles the 9 MB the command carries.
    const update = [{ $set: { first: nineMegabytes } }, { $set: { second: '$first' } }];
    const error = await docs.findOneAndUpdate({ _id: 2 }, update, { upsert: true }).catch((e) => e);
    expect(error).toMatchObject({
      code: 17420,
      message: 'Document to upsert is larger than 16777216',
    });
    expect(await docs.countDocuments()).toBe(0);
  });
});
