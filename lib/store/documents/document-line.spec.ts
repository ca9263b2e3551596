import { Decimal128, Double, Int32, Long, ObjectId, Timestamp } from 'mongodb';
import { isLockShaped } from './document-line';

describe('isLockShaped (the reply-side twin of the join pipeline’s check)', () => {
  it.each([
    ['missing', undefined],
    ['null', null],
    ['an empty object (a 0.1 form or a fresh field)', {}],
    ['a lock', { f: 3, line: [], lead: '- t' }],
    ['a fence read back as a bigint (useBigInt64)', { f: 5n }],
    ['a fence as a Long', { f: Long.fromNumber(5) }],
    ['a fence as an Int32', { f: new Int32(5) }],
    ['a fence as a Double', { f: new Double(5) }],
    ['a fence as a Decimal128', { f: Decimal128.fromString('5') }],
  ])('accepts %s', (_kind, value) => {
    expect(isLockShaped(value)).toBe(true);
  });

  it.each([
    ['a string', 'x'],
    ['a number', 1],
    ['an array', []],
    ['a line that is not an array', { line: 'x' }],
    ['a fence that is a string', { f: '1' }],
    ['a fence that is an ObjectId', { f: new ObjectId() }],
    ['a fence that is a Timestamp', { f: new Timestamp({ t: 1, i: 1 }) }],
  ])('refuses %s', (_kind, value) => {
    expect(isLockShaped(value)).toBe(false);
  });
});
