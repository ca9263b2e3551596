import { formatMs } from './util/durations';
import {
  clientCloseUnfinishedMessage,
  notAcquiredMessage,
  shutdownGraceEndedMessage,
} from './lock.messages';

describe('durations in messages', () => {
  it('are printed in whole milliseconds', () => {
    expect(formatMs(4999.029018000001)).toBe('4999 ms');
    expect(formatMs(0.4)).toBe('0 ms');
    expect(formatMs(1_000)).toBe('1000 ms');
  });

  it('notAcquiredMessage rounds the wait and the remaining lease', () => {
    expect(notAcquiredMessage(['k'], 4999.029018000001, 'h1', 1234.5678)).toBe(
      'Lock "k" not acquired within 4999 ms; held by h1 for 1235 ms more',
    );
    expect(notAcquiredMessage(['k'], 0, undefined, undefined)).toBe(
      'Lock "k" not acquired at once',
    );
  });

  it('notAcquiredMessage names ten keys and counts the rest', () => {
    const keys = Array.from({ length: 12 }, (_, i) => `k${String(i).padStart(2, '0')}`);
    expect(notAcquiredMessage(keys, 0, undefined, undefined)).toBe(
      'Lock "k00", "k01", "k02", "k03", "k04", "k05", "k06", "k07", "k08", "k09" and 2 more ' +
        'not acquired at once',
    );
    expect(notAcquiredMessage(keys.slice(0, 10), 0, undefined, undefined)).not.toContain('more');
  });

  it('the shutdown messages round their durations', () => {
    expect(shutdownGraceEndedMessage(2, 1999.6)).toContain('shutdownGraceMs (2000 ms)');
    expect(clientCloseUnfinishedMessage(250.25)).toContain('within 250 ms of the shutdown');
  });

  it('the grace period message names the keys, and a handle never released as a cause', () => {
    expect(shutdownGraceEndedMessage(1, 10_000, ['forgotten'])).toBe(
      '1 lock(s) ("forgotten") still held after shutdownGraceMs (10000 ms), by locked work ' +
        'still running or by a handle from acquire() never released: their signals abort and ' +
        'their locks are released now. Release every handle (try/finally, or await using)',
    );
  });
});
