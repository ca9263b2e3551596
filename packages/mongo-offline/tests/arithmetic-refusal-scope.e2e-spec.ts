// Adversarial review (attack-session). Fails on the code it was written against.
//
// Promised: the offline server behaves like MongoDB (packages/mongo-offline/README.md; MongoDB's
// update operators). MongoDB computes `$inc` / `$mul` of an int64 field by a double amount in
// double arithmetic: the result is a double, never "out of range" (only long op int overflow is
// BadValue). A JS number that is no int32 (2 ** 40, 1e21) is sent by the driver as a double. And
// an update whose operators touch the same path is refused at parse time with
// ConflictingUpdateOperators (40), whatever the document holds.
// What happens instead (since f13deba, refuseArithmetic in engine/decimal128-update.ts): every
// integral JS number is taken for an integer amount and added with BigInt, so
// - `$inc: { v: 2 ** 62 }` on a NumberLong 2^62 is refused with BadValue (2) where MongoDB stores
//   the double 2^63;
// - `$inc: { v: 1e21 }` on a NumberLong past 2^53 fails with BigInt('1e+21')'s SyntaxError
//   instead of storing the double sum;
// and, as before that commit, an `$inc` / `$mul` of a NumberLong past 2^53 that stays in range is
// applied as a no-op (matched 1, modified 0, value unchanged) though the commit says it "still
// takes $inc" (its test checks only that no error comes back): mingo's updater cannot add to a
// bson Long. A document lock's version stored as such a long never moves.
import { Double, Long } from 'mongodb';
import { useOfflineMongo } from './with-offline-mongo';

describe('offline mongo: $inc of an int64 by a double', () => {
  const harness = useOfflineMongo();
  const collection = (name: string) => harness().client.db('arithScope').collection<any>(name);
  const failureOf = (run: Promise<unknown>) =>
    run.then(
      () => undefined,
      (error: unknown) => error,
    );

  it('$inc of an int64 past 2^53 by a double beyond its range gives a double', async () => {
    const docs = collection('longPlusDouble');
    const big = Long.fromBigInt(2n ** 62n);
    await docs.insertOne({ _id: 1, v: big });
    // 2 ** 62 is no int32: the driver sends it as a double, as `new Double(...)` says outright.
    expect(await failureOf(docs.updateOne({ _id: 1 }, { $inc: { v: new Double(2 ** 62) } }))).toBe(
      undefined,
    );
    expect((await docs.findOne({ _id: 1 }))?.v).toBe(2 ** 63);
  });

  it('$inc of an int64 past 2^53 by 1e21 gives a double, not an internal error', async () => {
    const docs = collection('longPlusLargeDouble');
    await docs.insertOne({ _id: 1, v: Long.fromBigInt(2n ** 60n) });
    expect(await failureOf(docs.updateOne({ _id: 1 }, { $inc: { v: 1e21 } }))).toBe(undefined);
    expect((await docs.findOne({ _id: 1 }))?.v).toBe(1e21 + 2 ** 60);
  });
});

describe('offline mongo: $inc and $mul of an int64 past 2^53 within its range', () => {
  const harness = useOfflineMongo();

  it('are written (they were answered matched 1, modified 0, the value unchanged)', async () => {
    const docs = harness().client.db('arithScope').collection<any>('longInRange');
    await docs.insertOne({
      _id: 1,
      v: Long.fromString('9007199254740993'),
      w: Long.fromBigInt(2n ** 60n),
    });
    const incremented = await docs.updateOne({ _id: 1 }, { $inc: { v: 1 } });
    const multiplied = await docs.updateOne({ _id: 1 }, { $mul: { w: 2 } });
    expect([incremented.modifiedCount, multiplied.modifiedCount]).toEqual([1, 1]);
    const stored = await docs.findOne({ _id: 1 }, { promoteLongs: false });
    expect(stored?.v).toEqual(Long.fromString('9007199254740994'));
    expect(stored?.w).toEqual(Long.fromBigInt(2n ** 61n));
  });
});
