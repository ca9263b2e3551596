// The key of a document id is the same for every form MongoDB matches as one `_id`, including
// the forms the driver itself hands back: change events are keyed by
// `keyOfDocumentId(event.documentKey._id)`, and a waiter whose key differed would not be woken.
import { Decimal128, Long } from 'mongodb';
import { keyOfDocumentId } from './document-key';

describe('keyOfDocumentId: an int64 read by a useBigInt64 client (a bigint)', () => {
  // A real MongoDB returns an int64 `_id` (a Long-typed id) as a bigint to such a client, in
  // documents and change events alike (docs/options.md: `useBigInt64` stays the client's).
  // The offline test server cannot show it for ids that fit 32 bits: it sends those as int32.
  it.each([
    ['5n', 5n, 5],
    ['-7n', -7n, Long.fromNumber(-7)],
    ['2n ** 60n', 2n ** 60n, Long.fromBigInt(2n ** 60n)],
    ['{ a: 5n }', { a: 5n }, { a: 5 }],
  ])('%s has the key of the number it is', (_label, fromEvent, given) => {
    expect(keyOfDocumentId(fromEvent)).toBe(keyOfDocumentId(given));
  });
});

describe('keyOfDocumentId: Decimal128 ids that MongoDB matches as one _id', () => {
  // One type, as docs/document-locks.md asks ("use one type per id"): MongoDB compares decimals
  // by value, so `_id: 1.5` finds the document stored with `_id: 1.50` (and the unique index
  // refuses both), but the change event carries the stored form.
  it.each([
    ['1.50', '1.5'],
    ['1E+3', '1000'],
    ['100', '1.00E+2'],
    ['-0', '0'],
    ['0.000', '0E+5'],
  ])('Decimal128(%s) has the key of Decimal128(%s)', (a, b) => {
    expect(keyOfDocumentId(Decimal128.fromString(a))).toBe(
      keyOfDocumentId(Decimal128.fromString(b)),
    );
  });
});

describe('keyOfDocumentId: Decimal128 edge forms', () => {
  it.each([
    ['1.5E+1', '15'],
    ['1E+40', '1.000000000000000000000000000000000E+40'],
    ['10E+39', '1.000000000000000000000000000000000E+40'],
    ['NaN', 'NaN'],
    ['-Infinity', '-Infinity'],
    ['1234567890123456789012345678901234', '1234567890123456789012345678901234'],
    ['1.000000000000000000000000000000000E-6100', '1E-6100'],
  ])('Decimal128(%s) keys as the decimal %s', (given, canonical) => {
    expect(keyOfDocumentId(Decimal128.fromString(given))).toBe(
      `{"$numberDecimal":"${Decimal128.fromString(canonical).toString()}"}`,
    );
  });
});
