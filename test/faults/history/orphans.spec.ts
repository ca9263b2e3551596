import type { History, SectionRecord } from './history';
import {
  findOrphanedLeases,
  orphanBoundMs,
  summarizeLeaseSampling,
  type LeaseObservation,
} from './orphans';

// The orphan check is a judge too: each test feeds it what a sampler saw, with or without a
// leak, and expects exactly that verdict.

const bound = orphanBoundMs(1000); // 2500 ms
const options = { boundMs: bound, leaseMs: 1000, expiryMarginMs: 500 };

function section(overrides: Partial<SectionRecord> = {}): SectionRecord {
  return {
    key: 'k',
    fence: '7',
    holder: 'h1',
    worker: 'p1:w0',
    pid: 1,
    start: 0,
    end: 100,
    outcome: 'released',
    deadline: 1000,
    signalAt: null,
    ...overrides,
  };
}

function history(sections: SectionRecord[], extra: Partial<History> = {}): History {
  return { sections, deaths: [], pauses: [], finalLocks: [], ...extra };
}

/** The lease (key k, fence `fence`, holder h1) seen live by reads sent every 150 ms over [from, to]. */
function seen(from: number, to: number, fence = '7', holder = 'h1'): LeaseObservation[] {
  const observations: LeaseObservation[] = [];
  for (let t = from; t <= to; t += 150) {
    observations.push({ key: 'k', fence, holder, sentAt: t, receivedAt: t + 5 });
  }
  return observations;
}

function kinds(h: History, observations: LeaseObservation[]): string[] {
  return findOrphanedLeases(h, observations, options).map((v) => v.kind);
}

describe('findOrphanedLeases', () => {
  it('uses twice the operation timeout plus 500 ms as the bound', () => {
    expect(orphanBoundMs(1000)).toBe(2500);
  });

  it('accepts a lease that a reported section accounts for', () => {
    expect(kinds(history([section()]), seen(0, 90))).toEqual([]);
  });

  it('accepts an unmatched lease given back within the bound', () => {
    // An attempt whose reply was lost, given back after 2.4 s.
    expect(kinds(history([]), seen(0, 2400, '8'))).toEqual([]);
  });

  it('catches an unmatched lease live for longer than the bound', () => {
    const violations = findOrphanedLeases(history([section()]), seen(0, 3000, '8', 'h2'), options);
    expect(violations.map((v) => v.kind)).toEqual(['orphaned-lease']);
    expect(violations[0].detail).toContain('fence 8 held by h2');
    expect(violations[0].detail).toContain('no worker reported a section with that fence');
  });

  it('measures only what was surely live: first reply to last request', () => {
    // Two reads 2501 ms apart by their requests, but 2496 ms by first reply to last request.
    const observations: LeaseObservation[] = [
      { key: 'k', fence: '8', holder: 'h1', sentAt: 0, receivedAt: 5 },
      { key: 'k', fence: '8', holder: 'h1', sentAt: 2501, receivedAt: 2506 },
    ];
    expect(kinds(history([]), observations)).toEqual([]);
  });

  it('matches by key and fence, not by holder alone', () => {
    const sameFenceOtherKey = [...seen(0, 3000, '7').map((o) => ({ ...o, key: 'other' }))];
    expect(kinds(history([section()]), sameFenceOtherKey)).toEqual(['orphaned-lease']);
  });

  it('catches a reported lease still live long after its holder let go of it', () => {
    // Released at 100 with its deadline at 1000: live at 4650 is past the bound plus a lease.
    const lingering = history([section()]);
    expect(kinds(lingering, seen(0, 4500))).toEqual([]);
    const violations = findOrphanedLeases(lingering, seen(0, 4700), options);
    expect(violations.map((v) => v.kind)).toEqual(['orphaned-lease']);
    expect(violations[0].detail).toContain('after its holder let go of it');
  });

  it('excuses a dead holder until its lease and the margin have run out after its death', () => {
    // Died at 2000: its leases may live until 2000 + 1000 (lease) + 500 (margin).
    const deaths = [{ holder: 'h1', pid: 1, diedAt: 2000 }];
    const open = section({ end: null, outcome: 'open', deadline: null });
    expect(kinds(history([], { deaths }), seen(0, 3450, '8'))).toEqual([]);
    expect(kinds(history([], { deaths }), seen(0, 3700, '8'))).toEqual(['orphaned-lease']);
    // Its open section's lease counts from its death: bound and lease after 2000, and then
    // it is past the excuse too.
    expect(kinds(history([open], { deaths }), seen(0, 5450))).toEqual([]);
    expect(kinds(history([open], { deaths }), seen(0, 5700))).toEqual(['orphaned-lease']);
  });

  it('never clears an open section of a live holder (the checker reports it as unreleased)', () => {
    const open = section({ end: null, outcome: 'open', deadline: null });
    expect(kinds(history([open]), seen(0, 10_000))).toEqual([]);
  });

  it('excuses a paused holder while paused and for the bound after it was resumed', () => {
    const sections = [section({ holder: 'h2', pid: 2, fence: '1' })];
    const h = (to: number | null) => history(sections, { pauses: [{ pid: 2, from: 1000, to }] });
    const holderPids = new Map([['h2', 2]]);
    const check = (hist: History, observations: LeaseObservation[]) =>
      findOrphanedLeases(hist, observations, { ...options, holderPids }).map((v) => v.kind);
    expect(check(h(null), seen(0, 6000, '8', 'h2'))).toEqual([]);
    expect(check(h(4000), seen(0, 6000, '8', 'h2'))).toEqual([]);
    expect(check(h(3000), seen(0, 6000, '8', 'h2'))).toEqual(['orphaned-lease']);
    // Another process's pause excuses nothing.
    expect(check(h(null), seen(0, 6000, '8', 'h1'))).toEqual(['orphaned-lease']);
  });

  it('counts a lease that appeared during a failed acquire call from the end of that call', () => {
    // Won at ~0 by an attempt whose reply was lost; its call gave up at 2000.
    const call = { holder: 'h1', key: 'k', calledAt: -1000, settledAt: 2000 };
    const check = (observations: LeaseObservation[], calls = [call]) =>
      findOrphanedLeases(history([]), observations, { ...options, failedCalls: calls }).map(
        (v) => v.kind,
      );
    expect(check(seen(0, 4400, '8'))).toEqual([]);
    const late = findOrphanedLeases(history([]), seen(0, 4700, '8'), {
      ...options,
      failedCalls: [call],
    });
    expect(late.map((v) => v.kind)).toEqual(['orphaned-lease']);
    expect(late[0].detail).toContain('after its failed acquire call settled');
    // A call of another holder, on another key, or over before the lease appeared: no excuse.
    expect(check(seen(0, 4400, '8'), [{ ...call, holder: 'h2' }])).toEqual(['orphaned-lease']);
    expect(check(seen(0, 4400, '8'), [{ ...call, key: 'other' }])).toEqual(['orphaned-lease']);
    expect(check(seen(1000, 4400, '8'), [{ ...call, settledAt: 400 }])).toEqual(['orphaned-lease']);
  });

  it("adds what is known of an orphaned lease's key to its violation, and only to it", () => {
    const asked: string[] = [];
    const explain = (key: string, fence: string) => {
      asked.push(`${key}/${fence}`);
      return `history of ${key} at fence ${fence}`;
    };
    const violations = findOrphanedLeases(
      history([section()]),
      [...seen(0, 90), ...seen(0, 2700, '8')],
      { ...options, explain },
    );
    expect(violations).toHaveLength(1);
    expect(violations[0].detail).toMatch(
      /fence 8 held by h1[^\n]*\n {2}seen live @5\.0 to @2700\.0\nhistory of k at fence 8$/,
    );
    expect(asked).toEqual(['k/8']);
  });

  it('summarizes what was seen', () => {
    const summary = summarizeLeaseSampling(history([section()]), [
      ...seen(0, 300),
      ...seen(0, 600, '8'),
    ]);
    expect(summary).toEqual({ leases: 2, unmatched: 1, longestUnmatchedMs: 595 });
  });
});
