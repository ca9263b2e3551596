import { checkHistory, DEFAULT_SIGNAL_LATENESS_TOLERANCE_MS } from './checker';
import { FENCES_PER_ENTRY } from '../../../lib/store/line/line-document';
import type { History, SectionRecord } from './history';

// The checker is the suite's judge: each test feeds it a history with one known defect and
// expects exactly that defect back, so a checker that cannot fail is caught here.

/** A section with a 1000 ms lease from its start, whose signal never aborted. */
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
    deadline: (overrides.start ?? 0) + 1000,
    signalAt: null,
    ...overrides,
  };
}

/**
 * A holder on a 1000 ms lease that held past it, unrenewed: told through its signal at
 * `signalAt`, it stopped work then and reported the loss.
 */
function lostAtSignal(signalAt: number, overrides: Partial<SectionRecord> = {}): SectionRecord {
  return section({ fence: '1', end: signalAt, signalAt, outcome: 'lost', ...overrides });
}

/** The next holder, in another process. */
function successor(start: number, overrides: Partial<SectionRecord> = {}): SectionRecord {
  return section({
    fence: '2',
    start,
    end: start + 10,
    holder: 'h2',
    pid: 2,
    worker: 'p2:w0',
    ...overrides,
  });
}

function history(sections: SectionRecord[], extra: Partial<History> = {}): History {
  return { sections, deaths: [], pauses: [], finalLocks: [], ...extra };
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

  it('allows a lost holder told before its successor was granted to work on past the grant', () => {
    const h = history([
      section({ fence: '1', start: 0, end: 2000, signalAt: 1000, outcome: 'lost' }),
      successor(1100, { end: 1200 }),
    ]);
    expect(kinds(h)).toEqual([]);
  });

  it('counts a lost holder until its deadline: a successor granted before it is an overlap', () => {
    // A lease granted 300 ms before the holder's own deadline: the holder was promised the
    // lock until then, whatever it was told later.
    const h = history([lostAtSignal(1000), successor(700)]);
    expect(kinds(h)).toEqual(['overlap']);
  });

  it('ends a protected interval at the deadline, not at the end of work past it', () => {
    // Worked on for 400 ms after its signal, as a told holder may.
    const h = history([lostAtSignal(1000, { end: 1400 }), successor(1005)]);
    expect(kinds(h)).toEqual([]);
  });

  it('catches a lost holder told after its successor was granted', () => {
    const h = history([lostAtSignal(1200), successor(1100)]);
    const violations = checkHistory(h, options);
    expect(violations.map((v) => v.kind)).toEqual(['told-late']);
    expect(violations[0].detail).toContain('its signal aborted 100.00 ms after that grant');
  });

  it('catches a holder that worked past its deadline and its successor grant, never told', () => {
    const h = history([section({ fence: '1', end: 1300, deadline: 1000 }), successor(1100)]);
    const violations = checkHistory(h, options);
    expect(violations.map((v) => v.kind)).toEqual(['told-late']);
    expect(violations[0].detail).toContain('its signal never aborted');
  });

  it('allows a signal late by the timer tolerance, and no more', () => {
    const tolerance = DEFAULT_SIGNAL_LATENESS_TOLERANCE_MS;
    const withinTolerance = history([lostAtSignal(1100 + tolerance), successor(1100)]);
    const pastTolerance = history([lostAtSignal(1100 + tolerance + 1), successor(1100)]);
    const stricter = checkHistory(withinTolerance, { ...options, signalLatenessToleranceMs: 10 });
    expect(kinds(withinTolerance)).toEqual([]);
    expect(kinds(pastTolerance)).toEqual(['told-late']);
    expect(stricter.map((v) => v.kind)).toEqual(['told-late']);
  });

  it('allows a lost holder that stopped work before the grant to be told later, at release', () => {
    // Its release reached the server after the lease had ended: lost, but it did not run on.
    const h = history([
      section({ fence: '1', end: 900, signalAt: 1300, outcome: 'lost' }),
      successor(1100),
    ]);
    expect(kinds(h)).toEqual([]);
  });

  it('excuses a late notice only when the process was paused over its deadline', () => {
    const sections = [lostAtSignal(1200), successor(1100)];
    const pausedOverDeadline = history(sections, { pauses: [{ pid: 1, from: 500, to: 1190 }] });
    const neverResumed = history(sections, { pauses: [{ pid: 1, from: 500, to: null }] });
    const pausedBeforeDeadline = history(sections, { pauses: [{ pid: 1, from: 100, to: 400 }] });
    const otherProcessPaused = history(sections, { pauses: [{ pid: 2, from: 500, to: 1190 }] });
    const toldLongAfterResuming = history(sections, { pauses: [{ pid: 1, from: 500, to: 1020 }] });
    expect(kinds(pausedOverDeadline)).toEqual([]);
    expect(kinds(neverResumed)).toEqual([]);
    expect(kinds(pausedBeforeDeadline)).toEqual(['told-late']);
    expect(kinds(otherProcessPaused)).toEqual(['told-late']);
    expect(kinds(toldLongAfterResuming)).toEqual(['told-late']);
  });

  it('never excuses an overlap by a pause', () => {
    const h = history([lostAtSignal(1200), successor(900)], {
      pauses: [{ pid: 1, from: 500, to: 1190 }],
    });
    expect(kinds(h)).toEqual(['overlap']);
  });

  it('counts all the work of a section without deadline info', () => {
    // An incomplete record cannot show when its lease ended: the strictest reading holds.
    const workedPastGrant = history([
      lostAtSignal(1000, { end: 1200, deadline: null }),
      successor(1100),
    ]);
    const stoppedBeforeGrant = history([
      lostAtSignal(1000, { end: 1000, deadline: null }),
      successor(1100),
    ]);
    const violations = checkHistory(workedPastGrant, options);
    expect(violations.map((v) => v.kind)).toEqual(['overlap']);
    expect(violations[0].detail).toContain('deadline unknown');
    expect(kinds(stoppedBeforeGrant)).toEqual([]);
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
      section({ fence: '7', start: 0, end: 2000, signalAt: 1000, outcome: 'lost' }),
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
    const h = history([
      section({ fence: '1', start: 0, end: null, outcome: 'open', deadline: null }),
    ]);
    expect(kinds(h)).toEqual(['unreleased']);
  });

  it('does not blame a killed holder for its open acquisition, but ends it at its death', () => {
    const deaths = [{ holder: 'h1', pid: 1, diedAt: 50 }];
    const takeoverAfterDeath = history(
      [
        section({ fence: '1', start: 0, end: null, outcome: 'open', deadline: null }),
        section({ fence: '2', start: 1050, end: 1060, holder: 'h2', pid: 2 }),
      ],
      { deaths },
    );
    const takeoverBeforeDeath = history(
      [
        section({ fence: '1', start: 0, end: null, outcome: 'open', deadline: null }),
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

  it('places a section frozen between its hand-out and its record at its deadline', () => {
    // Granted at about 0 with a 1000 ms lease, the worker froze before recording its start;
    // the next holder came after that lease, and the thawed worker recorded 2000.
    const frozen = section({ fence: '1', start: 2000, deadline: 1000, end: 2010, outcome: 'lost' });
    const next = section({ fence: '2', start: 1500, end: 2500, holder: 'h2', pid: 2 });
    expect(kinds(history([frozen, next], { pauses: [{ pid: 1, from: 100, to: 1990 }] }))).toEqual(
      [],
    );
    // A deadline inside the next holder's interval is still an overlap.
    const late = section({ fence: '1', start: 2000, deadline: 1600, end: 2010, outcome: 'lost' });
    expect(kinds(history([late, next], { pauses: [{ pid: 1, from: 100, to: 1990 }] }))).toContain(
      'overlap',
    );
  });

  it('names a leaked lease and the sections recorded with a fence of its block', () => {
    const leaked = (fence: string) =>
      checkHistory(
        history([section({ fence: '40', outcome: 'released' })], {
          finalLocks: [
            {
              key: 'k',
              holder: 'h1',
              held: true,
              observedAt: 20,
              lease: { fence, remainingMs: 960 },
            },
          ],
        }),
        options,
      )[0].detail;
    expect(leaked('40')).toContain('(fence 40, 960.00 ms left; p1:w0 (fence 40, released))');
    expect(leaked('41')).toContain('(fence 41, 960.00 ms left; no section has it)');
    // A lease whose block holds the section's fence (its last): handed to it within the lease.
    const blockStart = 40 - Number(FENCES_PER_ENTRY) + 1;
    expect(leaked(String(blockStart))).toContain('960.00 ms left; p1:w0 (fence 40, released))');
    expect(leaked(String(blockStart - 1))).toContain('no section has it');
  });
});
