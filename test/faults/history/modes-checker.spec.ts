import { checkHistory, DEFAULT_SIGNAL_LATENESS_TOLERANCE_MS } from './checker';
import type { History } from './history';
import { checkModesHistory, type ModeSection, type ModesCheckerOptions } from './modes-checker';

// The mode-aware judge, tested like checker.spec.ts: each history carries one known defect
// (or none) and must give back exactly that.

/** A section with a 1000 ms lease from its start, released at `end`, never told of a loss. */
function section(overrides: Partial<ModeSection>): ModeSection {
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

/** Holder `n` in process `n`, granted fence `n`. */
function by(n: number, overrides: Partial<ModeSection>): ModeSection {
  return section({
    fence: String(n),
    holder: `h${n}`,
    worker: `p${n}:w0`,
    pid: n,
    ...overrides,
  });
}

const shared = (n: number, start: number, end: number, extra: Partial<ModeSection> = {}) =>
  by(n, { mode: 'shared', start, end, ...extra });
const exclusive = (n: number, start: number, end: number, extra: Partial<ModeSection> = {}) =>
  by(n, { mode: 'exclusive', start, end, ...extra });
const permit = (
  n: number,
  weight: number,
  start: number,
  end: number,
  extra: Partial<ModeSection> = {},
) => by(n, { key: 's', mode: 'shared', permits: 3, weight, start, end, ...extra });

function history(sections: ModeSection[], extra: Partial<History> = {}): History {
  return { sections, deaths: [], pauses: [], finalLocks: [], ...extra };
}

const options: ModesCheckerOptions = {
  leaseMs: 1000,
  crossProcessToleranceMs: 1,
  expiryMarginMs: 500,
};

function kinds(h: History, extra: Partial<ModesCheckerOptions> = {}): string[] {
  return checkModesHistory(h, { ...options, ...extra }).map((v) => v.kind);
}

describe('checkModesHistory: readers and writers', () => {
  it('accepts overlapping shared holders and exclusive ones between them', () => {
    const h = history([
      shared(1, 0, 100),
      shared(2, 20, 150),
      shared(3, 90, 120),
      exclusive(4, 151, 200),
      shared(5, 201, 300),
      shared(6, 202, 250),
    ]);
    expect(checkModesHistory(h, options)).toEqual([]);
  });

  it('catches an exclusive holder granted while a shared one still held', () => {
    expect(kinds(history([shared(1, 0, 100), exclusive(2, 50, 60)]))).toEqual(['overlap']);
  });

  it('catches a shared holder granted while an exclusive one still held', () => {
    const violations = checkModesHistory(
      history([exclusive(1, 0, 100), shared(2, 50, 60)]),
      options,
    );
    expect(violations.map((v) => v.kind)).toEqual(['overlap']);
    expect(violations[0].detail).toContain('[shared]');
    expect(violations[0].detail).toContain('[exclusive]');
  });

  it('catches an exclusive grant behind a long shared holder hidden by a short one', () => {
    const h = history([shared(1, 0, 500), shared(2, 10, 20), exclusive(3, 300, 310)]);
    expect(kinds(h)).toEqual(['overlap']);
  });

  it('ends a shared protected interval at the holder’s deadline, and a dead one’s at its death', () => {
    const pastDeadline = history([
      shared(1, 0, 1400, { deadline: 1000, signalAt: 1000, outcome: 'lost' }),
      exclusive(2, 1005, 1100),
    ]);
    const killed = history(
      [shared(1, 0, 0, { end: null, deadline: null, outcome: 'open' }), exclusive(2, 400, 450)],
      { deaths: [{ holder: 'h1', pid: 1, diedAt: 300 }] },
    );
    const grantedBeforeDeath = history(
      [shared(1, 0, 0, { end: null, deadline: null, outcome: 'open' }), exclusive(2, 200, 250)],
      { deaths: [{ holder: 'h1', pid: 1, diedAt: 300 }] },
    );
    expect(kinds(pastDeadline)).toEqual([]);
    expect(kinds(killed)).toEqual([]);
    expect(kinds(grantedBeforeDeath)).toEqual(['overlap']);
  });

  it('compares times across processes with the tolerance, within one process exactly', () => {
    const across = history([shared(1, 0, 100), exclusive(2, 99.5, 120)]);
    const within = history([shared(1, 0, 100), exclusive(2, 99.5, 120, { pid: 1 })]);
    expect(kinds(across)).toEqual([]);
    expect(kinds(within)).toEqual(['overlap']);
  });

  it('catches a shared holder working untold past its deadline and an exclusive grant', () => {
    const h = history([shared(1, 0, 1300, { deadline: 1000 }), exclusive(2, 1100, 1150)]);
    const violations = checkModesHistory(h, options);
    expect(violations.map((v) => v.kind)).toEqual(['told-late']);
    expect(violations[0].detail).toContain('its signal never aborted');
  });

  it('lets an untold shared holder work on past shared grants, but not past the next exclusive one', () => {
    const untold = shared(1, 0, 1600, { deadline: 1000, signalAt: 1550, outcome: 'lost' });
    const onlyShared = history([untold, shared(2, 1100, 1200), shared(3, 1300, 1400)]);
    const thenExclusive = history([untold, shared(2, 1100, 1200), exclusive(3, 1300, 1400)]);
    expect(kinds(onlyShared)).toEqual([]);
    expect(kinds(thenExclusive)).toEqual(['told-late']);
  });

  it('allows a late signal within the timer tolerance, and a holder paused over its deadline', () => {
    const tolerance = DEFAULT_SIGNAL_LATENESS_TOLERANCE_MS;
    const late = (by: number) =>
      shared(1, 0, 1100 + by, { deadline: 1000, signalAt: 1100 + by, outcome: 'lost' });
    const paused = history([late(500), exclusive(2, 1100, 1200)], {
      pauses: [{ pid: 1, from: 900, to: 1590 }],
    });
    expect(kinds(history([late(tolerance), exclusive(2, 1100, 1200)]))).toEqual([]);
    expect(kinds(history([late(tolerance + 1), exclusive(2, 1100, 1200)]))).toEqual(['told-late']);
    expect(kinds(paused)).toEqual([]);
  });

  it('judges an all-exclusive history as checker.ts does', () => {
    const histories = [
      history([exclusive(1, 0, 10), exclusive(2, 10.5, 20), exclusive(3, 25, 30)]),
      history([exclusive(1, 0, 100), exclusive(2, 1, 2), exclusive(3, 50, 60)]),
      history([
        exclusive(1, 0, 1200, { deadline: 1000, signalAt: 1200 }),
        exclusive(2, 1100, 1110),
      ]),
      history([
        exclusive(1, 0, 900, { signalAt: 1300, outcome: 'lost' }),
        exclusive(2, 1100, 1110),
      ]),
      history([exclusive(2, 0, 10), exclusive(1, 20, 30)]),
      // Unmarked sections are exclusive.
      history([by(1, { start: 0, end: 100 }), by(2, { start: 50, end: 60 })]),
    ];
    for (const h of histories) {
      expect(kinds(h)).toEqual(checkHistory(h, options).map((v) => v.kind));
    }
    expect(histories.map((h) => kinds(h).join('+'))).toEqual([
      '',
      'overlap+overlap',
      'told-late',
      '',
      'fence-order',
      'overlap',
    ]);
  });
});

describe('checkModesHistory: semaphores', () => {
  it('accepts permits up to the count, counted by weight', () => {
    const h = history([
      permit(1, 1, 0, 100),
      permit(2, 2, 10, 100),
      permit(3, 1, 101, 200),
      permit(4, 1, 150, 300),
      permit(5, 1, 160, 300),
    ]);
    expect(checkModesHistory(h, options)).toEqual([]);
  });

  it('catches weights adding up to more than the permits at one instant', () => {
    const violations = checkModesHistory(
      history([permit(1, 2, 0, 100), permit(2, 2, 50, 60)]),
      options,
    );
    expect(violations.map((v) => v.kind)).toEqual(['over-capacity']);
    expect(violations[0].detail).toContain('4 at once');
  });

  it('catches a capacity overrun behind intervals that ended in between', () => {
    // 1 + 1 + 1 fits; once the short one ended 2 fit again; the third grant makes 4.
    const h = history([
      permit(1, 1, 0, 500),
      permit(2, 1, 10, 20),
      permit(3, 1, 30, 500),
      permit(4, 2, 100, 150),
    ]);
    expect(kinds(h)).toEqual(['over-capacity']);
  });

  it('counts a permit holder until its deadline, and a lost one’s weight is free after it', () => {
    const lost = permit(1, 2, 0, 1300, { deadline: 1000, signalAt: 1000, outcome: 'lost' });
    expect(kinds(history([lost, permit(2, 2, 900, 950)]))).toEqual(['over-capacity']);
    expect(kinds(history([lost, permit(2, 2, 1001, 1050)]))).toEqual([]);
  });

  it('catches an untold permit holder only once a grant needed its permits', () => {
    // Holder 1 (weight 1) works untold past its deadline until 1500.
    const untold = permit(1, 1, 0, 1500, { deadline: 1000 });
    const fits = history([untold, permit(2, 1, 1100, 1200), permit(3, 1, 1150, 1200)]);
    const needsIt = history([untold, permit(2, 2, 1100, 1200), permit(3, 1, 1150, 1200)]);
    expect(kinds(fits)).toEqual([]);
    expect(kinds(needsIt)).toEqual(['told-late']);
  });

  it('reports a key held in two forms', () => {
    const h = history([permit(1, 1, 0, 10), by(2, { key: 's', start: 20, end: 30 })]);
    expect(kinds(h)).toEqual(['scenario']);
  });
});

describe('checkModesHistory: fences', () => {
  it('catches two grants of one key with the same fence', () => {
    expect(kinds(history([shared(1, 0, 100), shared(2, 10, 100, { fence: '1' })]))).toEqual([
      'fence-order',
    ]);
  });

  it('accepts concurrent shared grants seen out of fence order', () => {
    // Granted fences 2 then 1 by start: both were waiting, so either may have been first.
    const h = history([
      shared(2, 0, 100, { requestedAt: -50 }),
      shared(1, 1, 100, { requestedAt: -40 }),
    ]);
    expect(kinds(h)).toEqual([]);
  });

  it('orders a frozen holder by its deadline when its start was recorded after it (FINDINGS L18)', () => {
    // Process 1 was handed two shared holds (fences 1, 2), then frozen before its worker
    // recorded them: the leases ran out at 400, process 3 held exclusively (fence 3) at 500,
    // and process 1 recorded its starts at 1200, past their deadlines.
    const frozen = (fence: number, worker: string) =>
      by(1, {
        fence: String(fence),
        worker,
        mode: 'shared',
        start: 1200,
        end: 1210,
        deadline: 400,
        signalAt: 1200,
        outcome: 'lost',
        requestedAt: 0,
      });
    const writer = exclusive(3, 500, 520, { requestedAt: 100 });
    const h = history([frozen(1, 'p1:w0'), frozen(2, 'p1:w1'), writer], {
      pauses: [{ pid: 1, from: 300, to: 1200 }],
    });
    expect(kinds(h)).toEqual([]);
    // The same grants with the writer's fence below theirs are out of order.
    const below = history([frozen(4, 'p1:w0'), frozen(5, 'p1:w1'), writer], {
      pauses: [{ pid: 1, from: 300, to: 1200 }],
    });
    expect(kinds(below)).toEqual(['fence-order']);
  });

  it('catches a lower fence for a grant requested after another grant was seen', () => {
    const h = history([shared(2, 0, 100), shared(1, 20, 100, { requestedAt: 10 })]);
    const sem = history([permit(2, 1, 0, 100), permit(1, 1, 20, 100, { requestedAt: 10 })]);
    expect(kinds(h)).toEqual(['fence-order']);
    expect(kinds(sem)).toEqual(['fence-order']);
  });
});

describe('checkModesHistory: releaseScope', () => {
  const revocations = [{ scope: 'tenant', calledAt: 500, settledAt: 520 }];
  const revoked = (n: number, signalAt: number) =>
    shared(n, 0, signalAt, { scope: 'tenant', signalAt, outcome: 'lost' });

  it('ends a revoked holder’s interval at the call and gives it until its next renewal', () => {
    const h = history([revoked(1, 800), revoked(2, 600), exclusive(3, 530, 560)]);
    expect(kinds(h, { revocations, revocationNoticeMs: 400 })).toEqual([]);
  });

  it('catches a grant before the call, and a revoked holder told after its next renewal', () => {
    const early = history([revoked(1, 800), exclusive(3, 400, 410)]);
    const untold = history([revoked(1, 1000), exclusive(3, 530, 560)]);
    expect(kinds(early, { revocations, revocationNoticeMs: 400 })).toEqual(['overlap']);
    expect(kinds(untold, { revocations, revocationNoticeMs: 400 })).toEqual(['told-late']);
  });

  it('leaves holders of other scopes, or granted after the call, protected', () => {
    const other = shared(1, 0, 900, { scope: 'another' });
    const after = shared(2, 510, 900, { scope: 'tenant' });
    expect(kinds(history([other, exclusive(3, 530, 560)]), { revocations })).toEqual(['overlap']);
    expect(kinds(history([after, exclusive(3, 530, 560)]), { revocations })).toEqual(['overlap']);
  });

  it('extends the notice by a pause of the holder across the call', () => {
    const h = history([revoked(1, 1500), exclusive(3, 530, 560)], {
      pauses: [{ pid: 1, from: 450, to: 1300 }],
    });
    expect(kinds(h, { revocations, revocationNoticeMs: 400 })).toEqual([]);
  });
});

describe('checkModesHistory: leftovers', () => {
  it('catches a holder entry left held by a dead instance past its lease, and by a live one', () => {
    const h = history([shared(1, 0, 0, { end: null, deadline: null, outcome: 'open' })], {
      deaths: [{ holder: 'h1', pid: 1, diedAt: 100 }],
      finalLocks: [
        { key: 'k', holder: 'h1', held: true, observedAt: 2000 },
        { key: 'k', holder: 'h2', held: true, observedAt: 2000 },
      ],
    });
    expect(kinds(h)).toEqual(['held-by-dead', 'leaked-lock']);
  });

  it('catches an acquisition neither released nor reported lost', () => {
    expect(kinds(history([shared(1, 0, 0, { end: null, outcome: 'open' })]))).toEqual([
      'unreleased',
    ]);
  });
});
