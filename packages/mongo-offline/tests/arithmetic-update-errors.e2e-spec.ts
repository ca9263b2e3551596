// Adversarial review (attack-docs). Fails on the code it was written against.
//
// Promised: the offline server behaves like MongoDB. MongoDB refuses an `$inc` or `$mul` of a
// field that holds no number (a string, an array, null) with TypeMismatch (code 14, "Cannot apply
// $inc to a value of non-numeric type"), and an `$inc` whose int64 result overflows (it does not
// widen a long as it widens an int) with BadValue ("Failed to apply $inc operations to current
// value"); the whole update writes nothing. What happens: each of these updates answers
// matched 1, modified 0 (findOneAndUpdate returns the document), as if it had been applied, so a
// document lock's `update({ $inc: { balance: -1 } })` on a balance stored as text "succeeds" in
// the library's tests where MongoDB would reject it, and a commit at an int64 version at its
// maximum reads as "not written in 5 tries" instead of MongoDB's refusal.
// From: packages/mongo-offline/engine/apply-update.ts hands `$inc`/`$mul` to mingo's updater,
// which skips a non-numeric field and wraps nothing for int64 overflow; only the decimal path
// (engine/decimal128-update.ts) raises TypeMismatch.
import { Long, MongoServerError } from 'mongodb';
import { useOfflineMongo } from './with-offline-mongo';

describe('offline mongo: arithmetic updates MongoDB refuses', () => {
  const harness = useOfflineMongo();
  const collection = (name: string) => harness().client.db('arith').collection<any>(name);

  it.each<[string, unknown, Record<string, unknown>]>([
    ['$inc of a string', 'text', { $inc: { a: 1 } }],
    ['$inc of an array', [1], { $inc: { a: 1 } }],
    ['$inc of null', null, { $inc: { a: 1 } }],
    ['$mul of a string', 'text', { $mul: { a: 2 } }],
  ])('%s is TypeMismatch (14), nothing written', async (_label, value, update) => {
    const docs = collection(`nonNumeric${Math.random().toString(36).slice(2)}`);
    await docs.insertOne({ _id: 1, a: value, b: 1 });
    const failure = await docs.updateOne({ _id: 1 }, { ...update, $set: { b: 2 } }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(MongoServerError);
    expect((failure as MongoServerError).code).toBe(14);
    const viaFindAndModify = await docs.findOneAndUpdate({ _id: 1 }, update).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(viaFindAndModify).toBeInstanceOf(MongoServerError);
    expect(await docs.findOne({ _id: 1 })).toEqual({ _id: 1, a: value, b: 1 });
  });

  it('$inc of an int64 past its maximum is refused, nothing written', async () => {
    const docs = collection('overflow');
    await docs.insertOne({ _id: 1, v: Long.MAX_VALUE, b: 1 });
    const failure = await docs.updateOne({ _id: 1 }, { $inc: { v: 1 }, $set: { b: 2 } }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(MongoServerError);
    expect((failure as MongoServerError).code).toBe(2);
    const stored = await docs.findOne({ _id: 1 }, { promoteLongs: false });
    expect(stored).toEqual({ _id: 1, v: Long.MAX_VALUE, b: 1 });
  });
});

describe('offline mongo: arithmetic updates MongoDB takes', () => {
  const harness = useOfflineMongo();

  it('$inc of a number and of an int64 past 2^53 within its range is applied', async () => {
    const docs = harness().client.db('arith').collection<any>('applied');
    const big = Long.fromString('9007199254740993');
    await docs.insertOne({ _id: 1, n: 5, v: big });
    await docs.updateOne({ _id: 1 }, { $inc: { n: 2 } });
    expect((await docs.findOne({ _id: 1 }))?.n).toBe(7);
    const refused = await docs.updateOne({ _id: 1 }, { $inc: { v: 1 } }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeUndefined();
    const stored = await docs.findOne({ _id: 1 }, { promoteLongs: false });
    expect(stored?.v).toEqual(Long.fromString('9007199254740994'));
  });
});
