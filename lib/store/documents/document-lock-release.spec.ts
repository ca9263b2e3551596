import { Long } from 'mongodb';
import { releasedByUs } from './document-lock-release';
import type { StoredDocumentLock } from './document-lock-release';

describe('releasedByUs (a release of lease 10 tried again, its token no longer in the document)', () => {
  const released = (fence: number, lostFence: number): StoredDocumentLock => ({
    owner: null,
    fence: Long.fromNumber(fence),
    lostFence: Long.fromNumber(lostFence),
    releasedForm: true,
  });
  const held = (fence: number, lostFence: number): StoredDocumentLock => ({
    owner: 'someone',
    fence,
    lostFence,
    releasedForm: false,
  });

  it.each<[string, StoredDocumentLock | undefined, boolean]>([
    ['released by its owner, nobody locked since', released(10, 9), true],
    ['held by a later lock, no lease lost since ours', held(11, 9), true],
    ['later locks ended by release or commit', released(5_000, 9), true],
    ['a later lease ended without a release', held(12, 11), false],
    ['our own lease ended without a release (released after it ran out)', released(10, 10), false],
    // Other code's unlocks: the server finds the field not in the released form (`releasedForm`).
    [
      'unlocked by other code (owner null, or removed, the lease left)',
      { ...held(10, 9), owner: null },
      false,
    ],
    [
      'unlocked by other code (lease fields removed, owner too)',
      { ...released(10, 9), releasedForm: false },
      false,
    ],
    ['the released form not evaluated', { ...released(10, 9), releasedForm: undefined }, false],
    ['a lock field from before ours (wiped and written back)', released(9, 8), false],
    [
      'no lostFence (written by an earlier version)',
      { owner: null, fence: 10, releasedForm: true },
      false,
    ],
    ['no lock field', undefined, false],
  ])('%s', (_, lock, expected) => {
    expect(releasedByUs(lock, 10n)).toBe(expected);
  });
});
