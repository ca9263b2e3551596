import { checkHistory } from './checker';
import type { History, SectionRecord } from './history';

// The checker is the suite's judge: each test feeds it a history with one known defect and
// expects exactly that defect back, so a checker that cannot fail is caught here.

function section(overrides: Partial<SectionRecord>): SectionRecord {
  return {
    key: 'k',
    fence: '1',
    holder: 'h1',
    worker: 'p1:w0',
    pid: 1,
    start: 0,
    end: 10,
    outcome: 'released',
    ...overrides,
  };
}

function history(sections: SectionRecord[], extra: Partial<History> = {}): History {
  return { sections, deaths: [], finalLocks: [], ...extra };
}

const options = { leaseMs: 1000, crossProcessToleranceMs: 1, expiryMarginMs: 500 };

function kinds(h: History): string[] {
  return checkHistory(h, options).map((v) => v.kind);
}

describe('checkHistory', () => {
  it('accepts a clean history of hand-offs between processes', () => {
    const h = history([
      section({ fence: '1', start: 0, end: 10 }),
      section({ fence: '2', start: 10.5, end: 20, holder: 'h2', pid: 2, worker: 'p2:w0' }),
      section({ fence: '3', start: 25, end: 30 }),
      section({ key: 'other', fence: '1', start: 5, end: 28, holder: 'h2', pid: 2 }),
    ]);
    expect(checkHistory(h, options)).toEqual([]);
  });

  it('catches two live holders of one key overlapping', () => {
    const h = history([
      section({ fence: '1', start: 0, end: 10 }),
      section({ fence: '2', start: 5, end: 20, holder: 'h2', pid: 2 }),
    ]);
    expect(kinds(h)).toEqual(['overlap']);
  });

  it('catches an overlap hidden behind a short section (compares with the furthest end)', () => {
    const h = history([
      section({ fence: '1', start: 0, end: 100 }),
      section({ fence: '2', start: 1, end: 2, holder: 'h2', pid: 2 }),
      section({ fence: '3', start: 50, end: 60, holder: 'h3', pid: 3 }),
    ]);
    // Comparing neighbours only would miss the third section, which starts after the second ended.
    expect(kinds(h)).toEqual(['overlap', 'overlap']);
  });

  it('compares times within one process exactly, across processes with the tolerance', () => {
    const sameProcess = history([
      section({ fence: '1', start: 0, end: 10 }),
      section({ fence: '2', start: 9.5, end: 20, holder: 'h1', worker: 'p1:w1' }),
    ]);
    const acrossProcesses = history([
      section({ fence: '1', start: 0, end: 10 }),
      section({ fence: '2', start: 9.5, end: 20, holder: 'h2', pid: 2 }),
    ]);
    expect(kinds(sameProcess)).toEqual(['overlap']);
    expect(kinds(acrossProcesses)).toEqual([]);
  });

  it('allows a holder that was told of its loss to overlap its successor', () => {
    const h = history([
      section({ fence: '1', start: 0, end: 2000, outcome: 'lost' }),
      section({ fence: '2', start: 1100, end: 1200, holder: 'h2', pid: 2 }),
    ]);
    expect(kinds(h)).toEqual([]);
  });

  it('catches a fence that does not increase in grant order', () => {
    const h = history([
      section({ fence: '5', start: 0, end: 10 }),
      section({ fence: '4', start: 20, end: 30, holder: 'h2', pid: 2 }),
    ]);
    expect(kinds(h)).toEqual(['fence-order']);
  });

  it('catches a fence granted twice, even to a lost holder', () => {
    const h = history([
      section({ fence: '7', start: 0, end: 2000, outcome: 'lost' }),
      section({ fence: '7', start: 1500, end: 1600, holder: 'h2', pid: 2 }),
    ]);
    expect(kinds(h)).toEqual(['fence-order']);
  });

  it('compares fences as integers beyond 2^53', () => {
    const h = history([
      section({ fence: '9007199254740993', start: 0, end: 10 }),
      section({ fence: '9007199254740992', start: 20, end: 30, holder: 'h2', pid: 2 }),
    ]);
    expect(kinds(h)).toEqual(['fence-order']);
  });

  it('catches an acquisition that was neither released nor reported lost', () => {
    const h = history([section({ fence: '1', start: 0, end: null, outcome: 'open' })]);
    expect(kinds(h)).toEqual(['unreleased']);
  });

  it('does not blame a killed holder for its open acquisition, but ends it at its death', () => {
    const deaths = [{ holder: 'h1', pid: 1, diedAt: 50 }];
    const takeoverAfterDeath = history(
      [
        section({ fence: '1', start: 0, end: null, outcome: 'open' }),
        section({ fence: '2', start: 1050, end: 1060, holder: 'h2', pid: 2 }),
      ],
      { deaths },
    );
    const takeoverBeforeDeath = history(
      [
        section({ fence: '1', start: 0, end: null, outcome: 'open' }),
        section({ fence: '2', start: 40, end: 60, holder: 'h2', pid: 2 }),
      ],
      { deaths },
    );
    expect(kinds(takeoverAfterDeath)).toEqual([]);
    expect(kinds(takeoverBeforeDeath)).toEqual(['overlap']);
  });

  it('catches a lock held by a dead instance past its lease', () => {
    const deaths = [{ holder: 'h1', pid: 1, diedAt: 100 }];
    const withinLease = history([], {
      deaths,
      finalLocks: [{ key: 'k', holder: 'h1', held: true, observedAt: 900 }],
    });
    const pastLease = history([], {
      deaths,
      finalLocks: [{ key: 'k', holder: 'h1', held: true, observedAt: 1700 }],
    });
    expect(kinds(withinLease)).toEqual([]);
    expect(kinds(pastLease)).toEqual(['held-by-dead']);
  });

  it('catches a lock still held by a live instance after all work ended', () => {
    const h = history([section({})], {
      finalLocks: [
        { key: 'k', holder: 'h1', held: true, observedAt: 20 },
        { key: 'free', holder: 'h1', held: false, observedAt: 20 },
      ],
    });
    expect(kinds(h)).toEqual(['leaked-lock']);
  });
});
